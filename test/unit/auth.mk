# unit tests: auth
