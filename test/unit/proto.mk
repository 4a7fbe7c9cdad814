# unit tests: proto
