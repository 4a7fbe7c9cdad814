/* pgcrew — fuzz target: the HBA file and the ident map file (the input split
 * at its first NUL), then a match of a TCP and a Unix-socket login. */
#include "fuzz.h"
#include "auth/hba.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t l1, l2;
	char err[256];
	struct hba *hba = NULL;
	struct hba_ident *ident = NULL;
	char *rules = fuzz_next_part(&data, &size, &l1);
	char *map = fuzz_next_part(&data, &size, &l2);

	if (hba_ident_load(fuzz_file("ident", (const uint8_t *)map, l2), &ident, err, sizeof(err)) < 0)
		ident = NULL;
	if (hba_load(fuzz_file("hba", (const uint8_t *)rules, l1), ident, &hba, err, sizeof(err)) == 0) {
		struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(5000) };
		sin.sin_addr.s_addr = htonl(0x7f000001);
		struct hba_conn tcp = { .kind = HBA_HOST, .tls = true, .addr = (struct sockaddr *)&sin,
					.database = "db", .user = "alice" };
		struct hba_conn unix_conn = { .kind = HBA_LOCAL, .database = "alice", .user = "alice",
					      .replication = true };
		const struct hba_rule *r = hba_match(hba, &tcp);
		if (r) {
			(void)hba_method_name(hba_rule_method(r));
			(void)hba_rule_option(r, "ldapserver");
		}
		(void)hba_match(hba, &unix_conn);
		hba_free(hba);
	}
	if (ident) {
		(void)hba_ident_match(ident, "m", "alice", "alice");
		hba_ident_free(ident);
	}
	free(rules);
	free(map);
	return 0;
}
