# The pooler's layers, one folder each, from the top (see the rule at the
# top of doc/architecture.md): sup (the supervisor process), worker (a
# worker's loop), console, session, net; below them config, auth and proto
# (their own local.mk files) and base.
libpgcrew_a_SOURCES += \
	src/sup/supervisor.c src/sup/ledger.c src/sup/metrics.c src/sup/takeover.c \
	src/sup/sdnotify.c src/sup/welcome.c \
	src/worker/worker.c src/worker/janitor.c \
	src/console/admin.c src/console/admin_ext.c src/console/admin_sockets.c \
	src/console/control.c src/console/cmdparse.c src/console/rowmerge.c \
	src/session/client.c src/session/server.c src/session/pool.c src/session/pool_idle.c \
	src/session/link.c \
	src/session/cancel.c src/session/psrelay.c src/session/peer.c src/session/stats.c \
	src/session/authquery.c src/session/hostrole.c src/session/server_move.c \
	src/session/handover.c src/session/proxy_accept.c src/session/conn_takeover.c \
	src/session/world.c src/session/connlog.c src/session/reap.c src/session/session_ipc.c \
	src/net/stream.c src/net/uring.c src/net/tls.c src/net/dns.c src/net/listen.c \
	src/base/log.c src/base/util.c src/base/ipc.c src/base/ipc_msg.c src/base/shm.c src/base/shtab.c src/base/hmap.c src/base/hist.c \
	src/base/sched_slice.c src/base/strpool.c src/base/heaptrim.c
noinst_HEADERS += \
	include/admin.h \
	include/admin_ext.h \
	include/admin_result.h \
	include/admin_sockets.h \
	include/heaptrim.h \
	include/authquery.h \
	include/cancel.h \
	include/client.h \
	include/conn_takeover.h \
	include/cmdparse.h \
	include/control.h \
	include/ipc.h \
	include/janitor.h \
	include/pool_idle.h \
	include/link.h \
	include/connlog.h \
	include/handover.h \
	include/hist.h \
	include/hmap.h \
	include/shtab.h \
	include/welcome.h \
	include/sched_slice.h \
	include/uring.h \
	include/ledger.h \
	include/listen.h \
	include/log.h \
	include/metrics.h \
	include/objects.h \
	include/peer.h \
	include/pool.h \
	include/prepared.h \
	include/proxy_accept.h \
	include/hostrole.h \
	include/psrelay.h \
	include/reap.h \
	include/session_ipc.h \
	include/rowmerge.h \
	include/sdnotify.h \
	include/server.h \
	include/server_move.h \
	include/shm.h \
	include/stats.h \
	include/stream.h \
	include/supervisor.h \
	include/takeover.h \
	include/types.h \
	include/util.h \
	include/varcache.h include/strpool.h \
	include/worker.h include/world.h include/dns.h include/tls.h
