# TLS: per-worker SSL_CTXs and non-blocking TLS connections (OpenSSL 3).
libpgcrew_a_SOURCES += src/tls.c
noinst_HEADERS += include/tls.h
