# config module: pgbouncer.ini grammar, settings table, connection strings,
# userlist.txt. Unit tests: test/unit/config.mk.
libpgcrew_a_SOURCES += \
	src/config/config.c src/config/connstr.c src/config/ini.c \
	src/config/settings.c src/config/userlist.c src/config/value.c src/config/config_error.c
noinst_HEADERS += include/config.h \
	include/config/connstr.h include/config/ini.h include/config/settings.h \
	include/config/userlist.h include/config/value.h
EXTRA_DIST += test/unit/data/config
