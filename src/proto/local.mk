# proto module (filled in by its owner)
libpgcrew_a_SOURCES +=
