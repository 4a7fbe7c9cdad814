# proto: PostgreSQL v3 wire protocol (framing, builder, startup, errors).
# Headers are listed by name: a wildcard has no make rule in a VPATH build.
libpgcrew_a_SOURCES += \
	src/proto/packet.c src/proto/build.c src/proto/startup.c src/proto/error.c \
	src/proto/sqlprep.c src/proto/proxyproto.c src/proto/prepared.c src/proto/varcache.c \
	src/proto/cancelkey.c
noinst_HEADERS += \
	include/proto/packet.h include/proto/build.h include/proto/startup.h \
	include/proto/error.h include/proto/sqlprep.h include/proto/proxyproto.h \
	include/proto/cancelkey.h
