/* pgcrew — SHOW row merging (see rowmerge.h). Rows are plain heap strings;
 * a row finds the one it merges into through a hash of its key columns, so
 * a view of tens of thousands of pools from several workers merges in
 * linear time. */
#include "rowmerge.h"
#include "hmap.h"
#include "proto/build.h"
#include "proto/packet.h"
#include "log.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>

/* SHOW LISTS rows every worker holds its own copy of. */
static const char *const copied_lists[] = {
	"databases", "users", "peers", "pools", "peer_pools", "dns_names", "dns_zones",
};

void rowset_init(struct rowset *rs, const char *rule)
{
	memset(rs, 0, sizeof(*rs));
	rs->rule = rule;
	rs->ncols = -1;
}

static void free_row(char **row, int ncols)
{
	for (int j = 0; j < ncols; j++)
		free(row[j]);
	free(row);
}

void rowset_free(struct rowset *rs)
{
	for (int i = 0; i < rs->nrows; i++)
		free_row(rs->rows[i], rs->ncols);
	free(rs->rows);
	free(rs->index);
	rs->rows = NULL;
	rs->index = NULL;
	rs->nrows = rs->cap = 0;
	rs->index_cap = 0;
}

static char rule_of(const struct rowset *rs, int col)
{
	if (!rs->rule || col >= (int)strlen(rs->rule))
		return 'f';
	return rs->rule[col];
}

static bool is_key(char rule)
{
	return rule == 'k' || rule == 'n' || rule == 's';
}

static bool same_key(const struct rowset *rs, char **a, char **b)
{
	for (int j = 0; j < rs->ncols; j++) {
		if (!is_key(rule_of(rs, j)))
			continue;
		if (!a[j] != !b[j] || (a[j] && strcmp(a[j], b[j]) != 0))
			return false;
	}
	return true;
}

static bool is_copied_list(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(copied_lists); i++)
		if (name && strcmp(name, copied_lists[i]) == 0)
			return true;
	return false;
}

static void combine(char **into, char *from, char op, const char *row_key)
{
	if (is_key(op) || op == 'f' || op == 'W' || op == 'w' || !from)
		return;
	if (!*into) {
		*into = xstrdup(from);
		return;
	}
	long long a = strtoll(*into, NULL, 10), b = strtoll(from, NULL, 10);
	if (op == 'L')
		op = is_copied_list(row_key) ? 'M' : '+';
	long long v = op == '+' ? a + b : (a > b ? a : b);
	char num[32];
	snprintf(num, sizeof(num), "%lld", v);
	free(*into);
	*into = xstrdup(num);
}

static long long num_of(const char *v)
{
	return v ? strtoll(v, NULL, 10) : -1;
}

/* A (seconds, microseconds) pair, as SHOW POOLS' maxwait and maxwait_us:
 * the larger pair wins whole, so two workers' halves never mix. */
static void combine_pair(char **have, char **from)
{
	long long hs = num_of(have[0]), fs = num_of(from[0]);
	if (fs < hs || (fs == hs && num_of(from[1]) <= num_of(have[1])))
		return;
	for (int k = 0; k < 2; k++) {
		char *t = have[k];
		have[k] = from[k];
		from[k] = t;
	}
}

static uint32_t key_hash(const struct rowset *rs, char **row)
{
	uint32_t h = HMAP_SEED;
	for (int j = 0; j < rs->ncols; j++) {
		if (!is_key(rule_of(rs, j)))
			continue;
		h = row[j] ? hmap_hash(h, row[j], strlen(row[j]) + 1) : hmap_hash(h, "\xff", 1);
	}
	return h;
}

/* The index: open addressing over row numbers + 1 (0: empty), at most
 * half full. */
static void index_put(struct rowset *rs, int i, uint32_t h)
{
	uint32_t mask = (uint32_t)rs->index_cap - 1;
	while (rs->index[h & mask])
		h++;
	rs->index[h & mask] = i + 1;
}

static void index_grow(struct rowset *rs)
{
	free(rs->index);
	rs->index_cap = rs->index_cap ? 2 * rs->index_cap : 64;
	rs->index = xcalloc((size_t)rs->index_cap, sizeof(*rs->index));
	for (int i = 0; i < rs->nrows; i++)
		index_put(rs, i, key_hash(rs, rs->rows[i]));
}

static char **find_same(const struct rowset *rs, char **row, uint32_t h)
{
	uint32_t mask = (uint32_t)rs->index_cap - 1;
	for (int at; rs->index && (at = rs->index[h & mask]) != 0; h++)
		if (same_key(rs, rs->rows[at - 1], row))
			return rs->rows[at - 1];
	return NULL;
}

static void merge_row(struct rowset *rs, char **row)
{
	uint32_t h = rs->rule ? key_hash(rs, row) : 0;
	char **have = rs->rule ? find_same(rs, row, h) : NULL;
	if (have) {
		for (int j = 0; j < rs->ncols; j++) {
			if (rule_of(rs, j) == 'W' && j + 1 < rs->ncols && rule_of(rs, j + 1) == 'w')
				combine_pair(&have[j], &row[j]);
			else
				combine(&have[j], row[j], rule_of(rs, j), have[0]);
		}
		free_row(row, rs->ncols);
		return;
	}
	if (rs->nrows == rs->cap) {
		rs->cap = rs->cap ? 2 * rs->cap : 16;
		rs->rows = xrealloc(rs->rows, sizeof(*rs->rows) * (size_t)rs->cap);
	}
	rs->rows[rs->nrows++] = row;
	if (!rs->rule)
		return;
	if (2 * rs->nrows > rs->index_cap)
		index_grow(rs);
	else
		index_put(rs, rs->nrows - 1, h);
}

static char **parse_datarow(const uint8_t *body, size_t len, int *ncols)
{
	struct pkt_reader r;
	pkt_reader_init(&r, body, len);
	int n = pkt_get_u16(&r);
	char **row = xcalloc((size_t)(n ? n : 1), sizeof(char *));
	for (int j = 0; j < n && !r.failed; j++) {
		int32_t vlen = pkt_get_i32(&r);
		if (vlen < 0)
			continue;
		const uint8_t *v = pkt_get_bytes(&r, (size_t)vlen);
		if (!v)
			break;
		row[j] = xmalloc((size_t)vlen + 1);
		memcpy(row[j], v, (size_t)vlen);
		row[j][vlen] = 0;
	}
	if (!pkt_get_end(&r)) {
		free_row(row, n);
		return NULL;
	}
	*ncols = n;
	return row;
}

bool rowset_add(struct rowset *rs, const uint8_t *buf, size_t len)
{
	size_t off = 0;
	while (off < len) {
		struct pkt_hdr h;
		if (pkt_parse_header(buf + off, len - off, false, 1u << 30, &h, NULL) != PKT_OK ||
		    h.len > len - off)
			return false;
		if (h.type == 'D') {
			int n;
			char **row = parse_datarow(buf + off + 5, h.len - 5, &n);
			if (!row)
				return false;
			if (rs->ncols >= 0 && n != rs->ncols) {
				free_row(row, n);
				return false;
			}
			rs->ncols = n;
			merge_row(rs, row);
		}
		off += h.len;
	}
	return true;
}

static long long key_num(char **row, int col)
{
	return row[col] ? strtoll(row[col], NULL, 10) : 0;
}

/* PgBouncer's lists order: by the 's' columns' values (strcmp, NULL
 * last), then by the 'n' column's number. */
static const struct rowset *sorting;

static int cmp_rows(const void *pa, const void *pb)
{
	char **a = *(char **const *)pa, **b = *(char **const *)pb;
	const struct rowset *rs = sorting;
	for (int j = 0; j < rs->ncols; j++) {
		char r = rule_of(rs, j);
		if (r == 's') {
			if (!a[j] != !b[j])
				return a[j] ? -1 : 1;
			int c = a[j] ? strcmp(a[j], b[j]) : 0;
			if (c)
				return c;
		} else if (r == 'n') {
			long long x = key_num(a, j), y = key_num(b, j);
			if (x != y)
				return x < y ? -1 : 1;
		}
	}
	return 0;
}

/* The rows in the order to write: as they came, or sorted by their 's'
 * and 'n' columns (workers answer in any order). */
static char ***ordered(const struct rowset *rs)
{
	char ***out = xcalloc((size_t)rs->nrows + 1, sizeof(*out));
	for (int i = 0; i < rs->nrows; i++)
		out[i] = rs->rows[i];
	if (rs->rule && strpbrk(rs->rule, "sn") && rs->nrows > 1) {
		sorting = rs;
		qsort(out, (size_t)rs->nrows, sizeof(*out), cmp_rows);
		sorting = NULL;
	}
	return out;
}

void rowset_write(const struct rowset *rs, struct pktbuf *pb)
{
	char ***rows = ordered(rs);
	for (int i = 0; i < rs->nrows; i++) {
		pktbuf_begin(pb, 'D');
		pktbuf_put_u16(pb, (uint16_t)rs->ncols);
		for (int j = 0; j < rs->ncols; j++) {
			const char *v = rows[i][j];
			if (!v) {
				pktbuf_put_u32(pb, 0xffffffff);
				continue;
			}
			pktbuf_put_u32(pb, (uint32_t)strlen(v));
			pktbuf_put_bytes(pb, v, strlen(v));
		}
		pktbuf_finish(pb);
	}
	free(rows);
}
