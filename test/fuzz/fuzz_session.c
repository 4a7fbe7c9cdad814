/* pgcrew — fuzz target: the session core (client, server and pool state
 * machines, authentication, client TLS, the console, cancel routing, the
 * janitor's timeouts, the ledger handshake of several workers) on a world
 * of the unit rig. The first bytes choose the configuration; the rest is a
 * sequence of actions of up to FZ_CLIENTS fake clients, FZ_SERVERS fake
 * PostgreSQL backends, the clock and the supervisor, the loop pumped after
 * each. After every action the session core's invariants must hold
 * (rig_consistent, and idle servers at a message boundary); at the end
 * everything is closed and the world freed, so ASan's leak check and
 * rig_stop's "nothing still counted" cover every path. Input format and
 * seeds: test/fuzz/session_seeds.py. */
#include "fuzz.h"
#include "fakeclock.h"
#include "fuzz_session.h"
#include "rig.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "janitor.h"
#include "log.h"
#include "shm.h"
#include "stream.h"
#include "uring.h"
#include "world.h"

#define MAX_ACTIONS 64
#define SETTLE_ROUNDS 3

/* ---- users: the userlist and the passwords clients type ---- */

/* carol's verifier: password "pw", 16 iterations (cheap PBKDF2), salt
 * "fuzzsaltfuzzsalt"; bob's md5 secret: md5("hunter2" "bob"). */
const char *const fz_userlist =
	"\"alice\" \"secret\"\n"
	"\"bob\" \"md5a2cc14bcc08bcb211f578153967abd6d\"\n"
	"\"carol\" \"SCRAM-SHA-256$16:ZnV6enNhbHRmdXp6c2FsdA==$"
	"DFWKDsz8+Qqo3bGo9XO21IPk173zso0H6DY0rP5nJBo=:5/EvVkQScYjibpFC7PgllfCoVSP259l4/mx008fvdQw=\"\n"
	"\"dave\" \"\"\n";

const char *fz_password(const char *user)
{
	static const char *const known[][2] = {
		{ "alice", "secret" }, { "bob", "hunter2" }, { "carol", "pw" }, { "dave", "" },
	};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strcmp(user, known[i][0]) == 0)
			return known[i][1];
	return "guess";
}

/* ---- the configuration: the input's first bytes ---- */

/* The worlds' files and sockets: on tmpfs when there is one (a world's
 * directory is made and removed per input). */
static const char *tmp_dir;

/* Made once per process: client TLS (NULL when OpenSSL could not) and the
 * lines naming its files; whether the kernel gives an io_uring ring. */
static struct tls_ctx *client_tls;
static char tls_lines[600];
static bool ring;

/* The world's seventh byte, read at its start (a RELOAD keeps what it
 * chose): client TLS, the console, io_uring batches. */
enum extras {
	X_TLS = 0x01,             /* client_tls_sslmode = allow */
	X_TLS_REQUIRE = 0x02,     /* with X_TLS: require */
	X_CONSOLE = 0x04,         /* admin_users alice, stats_users bob */
	X_URING = 0x08,           /* the stream layer's io_uring batches, when there is a ring */
};
static uint8_t extras;
static char extra_lines[800];

static void choose_extras(uint8_t b6)
{
	extras = b6;
	extra_lines[0] = 0;
	if ((extras & X_TLS) && client_tls) {
		snprintf(extra_lines, sizeof(extra_lines), "client_tls_sslmode = %s\n%s",
			 extras & X_TLS_REQUIRE ? "require" : "allow", tls_lines);
	} else {
		extras &= (uint8_t)~(X_TLS | X_TLS_REQUIRE);
	}
	if (extras & X_CONSOLE)
		strncat(extra_lines, "admin_users = alice\nstats_users = bob\n",
			sizeof(extra_lines) - strlen(extra_lines) - 1);
}

static const char *const AUTH_TYPES[] = {
	"trust", "any", "plain", "md5", "scram-sha-256", "hba", "cert",
};

/* auth_type = hba: the rules (clients come over a Unix socket, or TCP on
 * 127.0.0.1). */
static const char *const HBA_TEXTS[] = {
	"local all all trust\nhost all all 127.0.0.1/32 trust\n",
	"local all all md5\nhost all all 127.0.0.1/32 md5\n",
	"local all all scram-sha-256\nhost all all 0.0.0.0/0 scram-sha-256\n",
	"local all all password\nhost all all 127.0.0.1/32 password\n",
	"local replication all trust\nlocal all all reject\nhost all all 127.0.0.1/32 md5\n",
	"local db alice trust\nlocal all bob md5\nlocal all all scram-sha-256\nhost all all all reject\n",
	"local all all peer\nhost all all 127.0.0.1/32 cert\n",
	"local all all cert\nhostssl all all all trust\n",
	"host all all 10.0.0.0/8 trust\n",
	"",
	"local sameuser all trust\nlocal all +group md5\nlocal all all gss\n",
	"local db,forced alice,bob,carol trust\nhost replication all 127.0.0.1/32 md5\n",
};

static void add(char *buf, size_t len, const char *line)
{
	size_t o = strlen(buf);
	snprintf(buf + o, len - o, "%s\n", line);
}

static void add_if(char *buf, size_t len, uint8_t bits, uint8_t bit, const char *line)
{
	if (bits & bit)
		add(buf, len, line);
}

/* Byte 1: pool mode, prepared statements, sizes; byte 2: timeouts. */
static void pool_settings(char *s, size_t len, uint8_t b1, uint8_t b2)
{
	static const char *const modes[] = { "session", "transaction", "statement", "transaction" };
	char line[64];
	snprintf(line, sizeof(line), "pool_mode = %s", modes[b1 & 3]);
	add(s, len, line);
	add(s, len, b1 & 4 ? "max_prepared_statements = 4" : "max_prepared_statements = 0");
	add_if(s, len, b1, 0x10, "min_pool_size = 1");
	add_if(s, len, b1, 0x20, "reserve_pool_size = 1\nreserve_pool_timeout = 1");
	add_if(s, len, b1, 0x40, "application_name_add_host = 1");
	add_if(s, len, b1, 0x80, "disable_pqexec = 1");
	add_if(s, len, b2, 0x01, "client_login_timeout = 5");
	add_if(s, len, b2, 0x02, "query_wait_timeout = 5");
	add_if(s, len, b2, 0x04, "idle_transaction_timeout = 5");
	add_if(s, len, b2, 0x08, "query_timeout = 5");
	add_if(s, len, b2, 0x10, "server_lifetime = 5\nserver_idle_timeout = 5");
	add_if(s, len, b2, 0x20, "client_idle_timeout = 5");
	add_if(s, len, b2, 0x40, "server_connect_timeout = 5\nserver_login_retry = 1");
	add_if(s, len, b2, 0x80, "transaction_timeout = 5\ncancel_wait_timeout = 5");
}

/* Byte 3: limits and checks; byte 4: auth_query, client limits, logging. */
static void limit_settings(char *s, size_t len, uint8_t b3, uint8_t b4)
{
	char line[64];
	snprintf(line, sizeof(line), "default_pool_size = %d", 1 + (b3 & 3));
	add(s, len, line);
	add_if(s, len, b3, 0x04, "max_client_conn = 3");
	add_if(s, len, b3, 0x08, "max_db_connections = 2\nmax_user_connections = 2");
	add_if(s, len, b3, 0x10, "ignore_startup_parameters = extra_float_digits, statement_timeout");
	add_if(s, len, b3, 0x20, "server_reset_query_always = 1");
	add_if(s, len, b3, 0x40, "server_check_delay = 0\nserver_check_query = select 1");
	add_if(s, len, b4, 0x01, "auth_user = alice");
	add_if(s, len, b4, 0x02, "max_db_client_connections = 2\nmax_user_client_connections = 2");
	add_if(s, len, b4, 0x08, "query_wait_notify = 1");
	add_if(s, len, b4, 0x10, "server_round_robin = 1");
	add_if(s, len, b4, 0x20, "verbose = 2");
	add_if(s, len, b4, 0x40, "sql_prepared_statements = 1\nunnamed_statement_cache = 1");
}

struct world_choice {
	char settings[2048];
	char databases[512];
	const char *hba;
	int workers;
	bool sup_holds;
};

/* Byte 5: the databases and users (a RELOAD may drop or change them). */
static void object_settings(struct world_choice *w, uint8_t b3, uint8_t b4, uint8_t b5)
{
	char *d = w->databases;
	size_t dl = sizeof(w->databases);
	add_if(d, dl, (uint8_t)~b5, 0x01, b5 & 0x10 ? "db = @PG@ dbname=db connect_query='SELECT 1'" :
		"db = @PG@ dbname=db");
	add_if(d, dl, (uint8_t)~b5, 0x02, "forced = @PG@ dbname=db user=bob");
	add(d, dl, b5 & 0x04 ? "sess = @PG@ dbname=db pool_mode=session pool_size=2" :
		"sess = @PG@ dbname=db pool_mode=session pool_size=1");
	add_if(d, dl, b4, 0x80, "replication = @PG@ dbname=replication");
	add_if(d, dl, b3, 0x80, "* = @PG@");
	add_if(w->settings, sizeof(w->settings), b5, 0x08, "server_fast_close = 1");
	add_if(w->settings, sizeof(w->settings), b5, 0x40, "max_packet_size = 300");
	add_if(w->settings, sizeof(w->settings), b5, 0x80, "auth_dbname = sess");
	/* Last: what follows goes to [users]. */
	add_if(w->settings, sizeof(w->settings), b5, 0x20,
	       "[users]\ncarol = pool_mode=statement max_user_connections=1");
}

static void choose_world(struct input *in, struct world_choice *w)
{
	uint8_t b0 = in_byte(in), b1 = in_byte(in), b2 = in_byte(in), b3 = in_byte(in), b4 = in_byte(in);
	uint8_t b5 = in_byte(in);
	char line[64];
	size_t auth = b0 % (sizeof(AUTH_TYPES) / sizeof(AUTH_TYPES[0]));

	memset(w, 0, sizeof(*w));
	snprintf(line, sizeof(line), "auth_type = %s", AUTH_TYPES[auth]);
	add(w->settings, sizeof(w->settings), line);
	add(w->settings, sizeof(w->settings), "scram_iterations = 16");
	pool_settings(w->settings, sizeof(w->settings), b1, b2);
	limit_settings(w->settings, sizeof(w->settings), b3, b4);
	if (strcmp(AUTH_TYPES[auth], "hba") == 0)
		w->hba = HBA_TEXTS[(b0 >> 3) % (sizeof(HBA_TEXTS) / sizeof(HBA_TEXTS[0]))];
	w->workers = b1 & 8 ? 2 : 1;
	w->sup_holds = b4 & 4;
	strncat(w->settings, extra_lines, sizeof(w->settings) - strlen(w->settings) - 1);
	object_settings(w, b3, b4, b5);
}

static struct rig_setup setup_of(const struct world_choice *wc, int workers)
{
	return (struct rig_setup){
		.workers = workers, .settings = wc->settings, .databases = wc->databases,
		.userlist = fz_userlist, .hba = wc->hba, .tmp = tmp_dir,
		.client_tls = extras & X_TLS ? client_tls : NULL, .console = extras & X_CONSOLE,
	};
}

/* ---- actions ---- */

/* RELOAD: another world's six bytes, applied to this one (its number of
 * workers stays: a no-reload setting). */
static void reload_op(struct input *in)
{
	struct world_choice wc;
	choose_world(in, &wc);
	struct rig_setup setup = setup_of(&wc, shm_n_workers());
	rig_reload(&setup);
	log_verbose = rig_w->cfg->verbose;
}

/* The clock jumps (past one timeout or all of them), then the janitor runs. */
static void clock_op(struct input *in)
{
	static const uint64_t steps_ms[] = { 300, 1000, 3000, 6000, 20000, 70000, 700000, 4000000 };
	fakeclock_advance((usec_t)steps_ms[in_pick(in, sizeof(steps_ms) / sizeof(steps_ms[0]))] * 1000);
	janitor_pass(rig_w);
}

enum action_kind { A_CLIENT, A_SERVER, A_CLOCK, A_SUP, A_RELOAD };

/* What an action byte's low 5 bits say (session_seeds.py's OP). */
static const struct action {
	uint8_t kind, op;
} ACTIONS[32] = {
	{ A_CLIENT, CO_STEP }, { A_CLIENT, CO_TLS }, { A_CLIENT, CO_BIG }, { A_CLIENT, CO_STARTUP },
	{ A_CLIENT, CO_SSL }, { A_CLIENT, CO_GSSENC }, { A_CLIENT, CO_CANCEL },
	{ A_CLIENT, CO_AUTH_GOOD }, { A_CLIENT, CO_AUTH_BAD }, { A_CLIENT, CO_QUERY },
	{ A_CLIENT, CO_EXTENDED }, { A_CLIENT, CO_MESSAGE }, { A_CLIENT, CO_BYTES },
	{ A_CLIENT, CO_TERMINATE }, { A_CLIENT, CO_HANGUP }, { A_CLIENT, CO_CONSOLE },
	{ A_SERVER, SO_STEP }, { A_SERVER, SO_BIG }, { A_SERVER, SO_STEP }, { A_SERVER, SO_PIECE },
	{ A_SERVER, SO_STEP }, { A_SERVER, SO_STEP }, { A_SERVER, SO_MESSAGE },
	{ A_SERVER, SO_MESSAGE }, { A_SERVER, SO_HANGUP }, { A_SERVER, SO_HANGUP },
	{ A_CLOCK, 0 }, { A_CLIENT, CO_PIECE }, { A_CLOCK, 0 }, { A_SUP, 0 }, { A_SUP, 0 },
	{ A_RELOAD, 0 },
};

/* FUZZ_SESSION_LOG=2: each action is told before it runs. */
static bool trace;

/* One byte: the low 5 bits say what, the top 3 which client or server. */
static void act(struct input *in)
{
	uint8_t b = in_byte(in);
	const struct action *a = &ACTIONS[b & 31];
	unsigned slot = b >> 5;
	if (trace)
		fprintf(stderr, "fuzz_session: action %u slot %u (%zu bytes left)\n", b & 31u, slot, in->n);
	switch (a->kind) {
	case A_CLIENT: fz_client_op((enum client_op)a->op, (int)(slot % FZ_CLIENTS), in); break;
	case A_SERVER: fz_server_op((enum server_op)a->op, (int)(slot % FZ_SERVERS), in); break;
	case A_CLOCK: clock_op(in); break;
	case A_SUP: fz_sup_op(in); break;
	default: reload_op(in); break;
	}
}

static void check(const char *when)
{
	char why[256];
	if (rig_consistent(why, sizeof(why)) && fz_servers_at_boundary(why, sizeof(why)))
		return;
	fprintf(stderr, "fuzz_session: %s: %s\n", when, why);
	abort();
}

/* The loop runs until the fakes hear nothing more from the pooler (a few
 * rounds at most: a fake answers only when an action says so). */
static void settle(void)
{
	for (int i = 0; i < SETTLE_ROUNDS; i++) {
		rig_pump();
		int heard = fz_servers_drain();
		heard += fz_clients_drain();
		if (!heard)
			break;
	}
	check("after an action");
}

void rig_failed(const char *msg)
{
	fprintf(stderr, "fuzz_session: %s\n", msg);
	abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* FUZZ_SESSION_LOG=1 shows the pooler's log (replaying one input), 2
	 * the actions too. */
	const char *log = getenv("FUZZ_SESSION_LOG");
	struct log_settings ls = { .to_stderr = log != NULL };
	trace = log && strcmp(log, "2") == 0;
	log_setup(&ls);
	signal(SIGPIPE, SIG_IGN);
	tmp_dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : NULL;
	client_tls = fz_tls_server(NULL, tls_lines, sizeof(tls_lines));
	ring = uring_init() == URING_READY;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size }, first = in;
	struct world_choice wc;
	const uint8_t *skip;

	(void)in_take(&in, &skip, 6);
	choose_extras(in_byte(&in));
	choose_world(&first, &wc);
	struct rig_setup setup = setup_of(&wc, wc.workers);
	fakeclock_reset();
	rig_start_with(&setup);
	stream_set_batching(ring && (extras & X_URING));
	log_verbose = rig_w->cfg->verbose;
	if (wc.workers > 1)
		fz_sup_start(wc.sup_holds);
	fz_clients_reset();
	fz_servers_reset();
	for (int i = 0; i < MAX_ACTIONS && in.n > 0; i++) {
		act(&in);
		settle();
	}
	/* Everyone hangs up; the pooler must let go of everything. */
	fz_clients_close();
	fz_servers_close();
	settle();
	stream_set_batching(false);
	rig_stop();
	fz_sup_stop();
	log_verbose = 0;
	return 0;
}
