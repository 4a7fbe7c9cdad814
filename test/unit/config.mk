# unit tests: config
