# dns module (being written)
