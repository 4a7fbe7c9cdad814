# auth module: crypto primitives, SCRAM-SHA-256, md5.
libpgcrew_a_SOURCES += \
	src/auth/crypto.c src/auth/scram.c src/auth/md5.c
noinst_HEADERS += include/auth/crypto.h include/auth/scram.h include/auth/md5.h
