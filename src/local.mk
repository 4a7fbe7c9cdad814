# Core: processes, event loop, connections, pools.
libpgcrew_a_SOURCES += \
	src/log.c src/util.c src/ipc.c src/supervisor.c src/worker.c \
	src/listen.c src/stream.c src/client.c src/server.c src/pool.c \
	src/varcache.c src/cancel.c src/janitor.c
noinst_HEADERS += include/*.h
