# Core: processes, event loop, connections, pools.
libpgcrew_a_SOURCES += \
	src/log.c src/util.c src/ipc.c src/supervisor.c src/worker.c \
	src/listen.c src/stream.c src/client.c src/server.c src/pool.c src/link.c \
	src/varcache.c src/strpool.c src/cancel.c src/janitor.c src/stats.c src/admin.c \
	src/shm.c src/ledger.c src/rowmerge.c src/takeover.c src/peer.c src/control.c \
	src/admin_ext.c src/admin_sockets.c src/sdnotify.c src/hist.c src/metrics.c \
	src/prepared.c src/psrelay.c src/handover.c src/server_move.c src/conn_takeover.c \
	src/proxy_accept.c src/hostrole.c src/authquery.c src/world.c
noinst_HEADERS += \
	include/admin.h \
	include/admin_ext.h \
	include/admin_result.h \
	include/admin_sockets.h \
	include/authquery.h \
	include/cancel.h \
	include/client.h \
	include/conn_takeover.h \
	include/control.h \
	include/ipc.h \
	include/janitor.h \
	include/link.h \
	include/handover.h \
	include/hist.h \
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
	include/worker.h include/world.h
