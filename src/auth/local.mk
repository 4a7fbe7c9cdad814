# auth module: crypto primitives, SCRAM-SHA-256, md5, HBA/ident files.
libpgcrew_a_SOURCES += \
	src/auth/crypto.c src/auth/scram.c src/auth/md5.c src/auth/hba.c \
	src/auth/authcache.c src/auth/certauth.c \
	src/auth/peerauth.c src/auth/authpool.c src/auth/extauth.c src/auth/ldapconf.c \
	src/auth/ldapauth.c src/auth/pamauth.c
noinst_HEADERS += include/auth/crypto.h include/auth/scram.h include/auth/md5.h \
	include/auth/hba.h include/auth/authcache.h include/auth/verdict.h \
	include/auth/certauth.h include/auth/peerauth.h include/auth/authpool.h \
	include/auth/extauth.h include/auth/ldapconf.h
