# dns unit tests (being written)
