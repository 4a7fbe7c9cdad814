# unit tests: core
