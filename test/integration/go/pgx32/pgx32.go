// Package pgx32 pins the pgx release whose own test suite has the protocol
// 3.2 connect test (TestConnectProtocolVersion32); test_drivers_pgx32.py
// runs that test of github.com/jackc/pgx/v5/pgconn against pgcrew.
package pgx32

import _ "github.com/jackc/pgx/v5/pgconn"
