/*
 * mosbench-httpload: the paper's Apache client (section 5.4): HTTP GETs of one static file, or (--files)
 * of a file set with a popularity for each file (Veal & Foong's SPECweb2005 Support downloads).
 *
 * Each connection slot repeatedly connects, sends a GET, reads the whole response and checks it
 * (status 200, and a Content-Length and body of the file's size), then, by default, waits for the
 * server to close and opens a new connection for the next request: one connection per request, as
 * the paper ran Apache. With --keepalive a slot keeps its connection for every request (one the
 * server lets go before answering is opened again and the request resent; "sent" counts both). Slots are
 * spread evenly over the ports and over the threads (a thread per load-generator CPU, one epoll set
 * each). A request not answered within --timeout-ms is lost and its connection reset. Bodies are read
 * through, not kept, so a file may be any size; their bytes are the work a file set's points count.
 * Each answer is also judged by SPECweb2005's rules: "good" when its body came at --good-rate bytes per
 * second or faster (its size over its latency) or within --good-ms, "tolerable" likewise.
 */
#include "run.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define NAME "mosbench-httpload"
#define BUF_SIZE 16384
#define MAX_FILES 65536
#define REQUEST_SIZE 512

/* IDLE: open loop, waiting for its next request to be due (its kept connection, if any, stays open). */
enum conn_state { IDLE, CONNECTING, SENDING, READING, BODY, DRAINING };

struct file {
	char path[256];
	long bytes;		/* its body's length; -1: any */
	double cumulative;	/* the popularity of this file and all before it */
};

struct conn {
	int fd;
	uint16_t port;
	enum conn_state state;
	uint64_t started_ns;	/* the request's start: its connect, or its send on a kept connection */
	uint64_t intended_ns;	/* when it was due: its latency counts from here */
	const struct file *file;
	size_t sent;
	size_t have;
	long body_len;		/* the answer's Content-Length */
	long body_left;		/* BODY: bytes of the body still to come */
	int reused;		/* a kept connection that has answered before */
	char request[REQUEST_SIZE];
	size_t request_len;
	char buf[BUF_SIZE];
};

struct httpload {
	unsigned per_port;
	const char *path;
	const char *files_path;
	long expect_bytes;	/* --path: the body length every response must have; -1: any */
	int keepalive;
	uint64_t timeout_ns;
	double good_rate, tolerable_rate;	/* body bytes per second */
	uint64_t good_ns, tolerable_ns;
	struct file *files;
	unsigned nfiles;
};

/* Per thread: the popularity draw and the window's byte-rate verdicts. */
struct http_thread {
	uint64_t rng;
	uint64_t good, tolerable;
};

static uint64_t next_random(uint64_t *x)
{
	/* xorshift64*: the file draws need speed and spread, not secrecy */
	*x ^= *x >> 12;
	*x ^= *x << 25;
	*x ^= *x >> 27;
	return *x * 2685821657736338717ull;
}

static const struct file *draw_file(struct load_thread *t, const struct httpload *h)
{
	if (h->nfiles == 1)
		return &h->files[0];
	struct http_thread *ht = t->priv;
	double u = (double)(next_random(&ht->rng) >> 11) / 9007199254740992.0 * h->files[h->nfiles - 1].cumulative;
	unsigned lo = 0, hi = h->nfiles - 1;
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		if (h->files[mid].cumulative > u)
			hi = mid;
		else
			lo = mid + 1;
	}
	return &h->files[lo];
}

/* The request (c->request) again, on a new connection. */
static int reconnect(struct load_thread *t, struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);	/* also leaves the epoll set */
	c->started_ns = load_now_ns();
	c->sent = c->have = 0;
	c->reused = 0;
	c->state = CONNECTING;
	c->fd = load_tcp_connect(t, c->port, c);
	return c->fd < 0 ? -1 : 0;
}

/* The run's issue hook: the item's next request, due at intended_ns, for a file drawn by popularity. */
static int http_issue(struct load_thread *t, void *item, uint64_t intended_ns)
{
	const struct httpload *h = t->run->priv;
	struct conn *c = item;
	c->intended_ns = intended_ns;
	c->file = draw_file(t, h);
	int len = snprintf(c->request, sizeof(c->request), "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", c->file->path,
			   t->run->host_name, h->keepalive ? "" : "Connection: close\r\n");
	c->request_len = len > 0 && (size_t)len < sizeof(c->request) ? (size_t)len : 0;
	if (!h->keepalive || c->fd < 0)
		return reconnect(t, c);
	c->started_ns = load_now_ns();
	c->sent = c->have = 0;
	c->reused = 1;
	c->state = SENDING;
	load_watch(t, c->fd, c, EPOLLOUT);
	return 0;
}

/* Done with its request: closed loop, the next goes now; open loop, it waits until one is due. */
static int finished(struct load_thread *t, const struct httpload *h, struct conn *c)
{
	c->state = IDLE;
	if (h->keepalive && c->fd >= 0)
		load_watch(t, c->fd, c, EPOLLIN);	/* a server that lets it go is seen, not read into */
	return load_next(t, c);
}

static void judge(struct load_thread *t, const struct httpload *h, long bytes, uint64_t latency_ns)
{
	struct http_thread *ht = t->priv;
	/* SPECweb judges a page by its time and a download by its byte rate: a small answer cannot come
	 * at 99000 bytes/s however fast, and a large one may take longer than 3 s at a fine rate. An answer
	 * meeting either is judged met. */
	if (!t->in_window)
		return;
	double rate = bytes && latency_ns ? (double)bytes * 1e9 / (double)latency_ns : INFINITY;
	ht->good += rate >= h->good_rate || latency_ns <= h->good_ns;
	ht->tolerable += rate >= h->tolerable_rate || latency_ns <= h->tolerable_ns;
}

/*
 * A server may let an idle kept connection go at any moment (Apache's event MPM does when it is busy);
 * a request sent on it as it closed gets no byte of an answer. Such a GET is sent again on a new
 * connection, as RFC 9112 (9.3.1) allows; a connection that closes mid-answer is still a failure.
 */
static int closed_unanswered(const struct conn *c)
{
	return c->reused && c->have == 0 && c->state != DRAINING;
}

/*
 * The response's head in c->buf: 1 when it is complete and right (c->body_left set, the bytes of the
 * body already read counted off), 0 while incomplete, -1 when malformed or wrong (after failing the run).
 */
static int parse_head(struct load_thread *t, struct conn *c)
{
	char *end = memmem(c->buf, c->have, "\r\n\r\n", 4);
	if (!end) {
		if (c->have == BUF_SIZE) {
			load_fail(&t->run->stats, NAME ": port %u sent more than %d bytes of headers", c->port, BUF_SIZE);
			return -1;
		}
		return 0;
	}
	size_t header_len = (size_t)(end - c->buf) + 4;
	int status = 0;
	if (sscanf(c->buf, "HTTP/%*d.%*d %d", &status) != 1 || status != 200) {
		load_count(t, LC_ERRORS, 1);
		int line = (int)strcspn(c->buf, "\r\n");
		load_fail(&t->run->stats, NAME ": port %u answered '%.*s' for %s", c->port, line > 80 ? 80 : line, c->buf,
			  c->file->path);
		return -1;
	}
	long length = -1;
	for (char *p = c->buf; p < end; p = strstr(p, "\r\n") + 2) {
		if (!strncasecmp(p, "Content-Length:", 15)) {
			length = strtol(p + 15, NULL, 10);
			break;
		}
	}
	if (length < 0) {
		load_fail(&t->run->stats, NAME ": port %u answered without a Content-Length", c->port);
		return -1;
	}
	if (c->file->bytes >= 0 && length != c->file->bytes) {
		load_count(t, LC_ERRORS, 1);
		load_fail(&t->run->stats, NAME ": port %u sent a body of %ld bytes for %s, %ld expected", c->port, length,
			  c->file->path, c->file->bytes);
		return -1;
	}
	size_t body_here = c->have - header_len;
	if ((long)body_here > length) {
		load_fail(&t->run->stats, NAME ": port %u sent bytes after a complete response", c->port);
		return -1;
	}
	c->body_len = length;
	c->body_left = length - (long)body_here;
	return 1;
}

/* The whole response is in: counted, judged, and the slot goes on to its next request. */
static int answered(struct load_thread *t, const struct httpload *h, struct conn *c, long bytes)
{
	uint64_t latency = load_now_ns() - c->intended_ns;
	load_latency(t, latency);
	load_count(t, LC_DONE, 1);
	load_count(t, LC_BYTES, (uint64_t)bytes);
	judge(t, h, bytes, latency);
	if (h->keepalive)
		return finished(t, h, c);
	c->state = DRAINING;
	return 0;
}

static int on_event(struct load_thread *t, const struct httpload *h, struct conn *c, uint32_t events)
{
	if (c->state == IDLE) {
		/* Only a kept connection waits in the epoll set while idle: the server closed it, or sent
		 * what nobody asked for. Either way the next request gets a new connection. */
		close(c->fd);
		c->fd = -1;
		return 0;
	}
	if (c->state == CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);
		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			load_fail(&t->run->stats, NAME ": connect to %s:%u: %s", t->run->host_name, c->port, strerror(err));
			return -1;
		}
		c->state = SENDING;
	}
	if (c->state == SENDING) {
		ssize_t n = send(c->fd, c->request + c->sent, c->request_len - c->sent, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN)
				return 0;
			if ((errno == EPIPE || errno == ECONNRESET) && closed_unanswered(c))
				return reconnect(t, c);
			load_fail(&t->run->stats, NAME ": send to port %u: %s", c->port, strerror(errno));
			return -1;
		}
		c->sent += (size_t)n;
		if (c->sent < c->request_len)
			return 0;
		load_count(t, LC_SENT, 1);
		c->state = READING;
		load_watch(t, c->fd, c, EPOLLIN);
		return 0;
	}
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return 0;
	for (;;) {
		static _Thread_local char sink[1 << 16];
		char *into = c->state == READING ? c->buf + c->have : sink;
		size_t room = c->state == READING ? BUF_SIZE - c->have : sizeof(sink);
		if (c->state == BODY && (long)room > c->body_left)
			room = (size_t)c->body_left;
		ssize_t n = recv(c->fd, into, room, 0);
		if (n < 0) {
			if (errno == EAGAIN)
				return 0;
			if (errno == ECONNRESET && c->state == DRAINING)
				return finished(t, h, c);
			if (errno == ECONNRESET && closed_unanswered(c))
				return reconnect(t, c);
			load_fail(&t->run->stats, NAME ": recv from port %u: %s", c->port, strerror(errno));
			return -1;
		}
		if (n == 0) {
			if (c->state == DRAINING) {	/* the server closed: the next request gets a new connection */
				close(c->fd);
				c->fd = -1;
				return finished(t, h, c);
			}
			if (closed_unanswered(c))
				return reconnect(t, c);
			load_fail(&t->run->stats, NAME ": port %u closed the connection mid-response", c->port);
			return -1;
		}
		if (c->state == DRAINING) {
			load_fail(&t->run->stats, NAME ": port %u sent bytes after a complete response", c->port);
			return -1;
		}
		if (c->state == BODY) {
			c->body_left -= n;
			if (!c->body_left && answered(t, h, c, c->body_len))
				return -1;
			if (c->state != BODY)
				return 0;
			continue;
		}
		c->have += (size_t)n;
		int head = parse_head(t, c);
		if (head < 0)
			return -1;
		if (!head)
			continue;
		if (c->body_left) {
			c->state = BODY;
			continue;
		}
		if (answered(t, h, c, c->body_len))
			return -1;
		if (c->state != READING)
			return 0;
	}
}

static int http_event(struct load_thread *t, void *item, uint32_t events)
{
	return on_event(t, t->run->priv, item, events);
}

static int http_scan(struct load_thread *t, uint64_t now)
{
	const struct httpload *h = t->run->priv;
	for (unsigned i = 0; i < t->nitems; i++) {
		struct conn *c = t->items[i];
		if (c->state != DRAINING && c->state != IDLE && now - c->started_ns >= h->timeout_ns) {
			load_count(t, LC_LOST, 1);
			if (reconnect(t, c))
				return -1;
		}
	}
	return 0;
}

static void *http_thread(struct load_thread *t)
{
	struct http_thread *ht = t->priv;
	ht->rng = 0x9e3779b97f4a7c15ull * (t->id + 1);	/* each thread its own draws, the same every run */
	for (unsigned i = 0; i < t->nitems; i++)
		((struct conn *)t->items[i])->state = IDLE;
	if (load_start_items(t))
		return NULL;
	load_epoll_loop(t, http_event, http_scan);
	return NULL;
}

static void describe(struct load_run *r, FILE *out)
{
	const struct httpload *h = r->priv;
	uint64_t good = 0, tolerable = 0;
	for (unsigned i = 0; i < r->nthreads; i++) {
		const struct http_thread *ht = r->threads[i].priv;
		good += ht->good;
		tolerable += ht->tolerable;
	}
	fprintf(out, "\"connections\": %u, \"ports\": %u, \"keepalive\": %s, \"timeout_ms\": %.0f, \"files\": %u, "
		"\"good\": %llu, \"tolerable\": %llu, \"good_rate\": %.0f, \"tolerable_rate\": %.0f, \"good_ms\": %.0f, "
		"\"tolerable_ms\": %.0f",
		r->nitems, r->nports, h->keepalive ? "true" : "false", (double)h->timeout_ns / 1e6, h->nfiles,
		(unsigned long long)good, (unsigned long long)tolerable, h->good_rate, h->tolerable_rate,
		(double)h->good_ns / 1e6, (double)h->tolerable_ns / 1e6);
}

static void usage(void)
{
	fprintf(stderr, "usage: " NAME " --ports LIST --cpus LIST [--connections-per-port N] [--path P]\n"
		"                         [--expect-bytes N] [--files LIST] [--keepalive] [--timeout-ms MS] [options]\n"
		"  --connections-per-port N   concurrent connections per port (default 2)\n"
		"  --path P           the file to GET (default /index.html)\n"
		"  --expect-bytes N   every body must be N bytes (default: any)\n"
		"  --files LIST       GET a file set instead: a line per file, \"WEIGHT BYTES PATH\", each\n"
		"                     request's file drawn by weight, its body checked to be BYTES long\n"
		"  --keepalive        every request on one kept connection (default: a connection each)\n"
		"  --timeout-ms MS    a request not answered by then is lost (default 5000)\n"
		"  --good-rate B      an answer is good when its body came at B bytes/s or more (default\n"
		"                     99000, SPECweb2005's BYTE_RATE_GOOD)\n"
		"  --tolerable-rate B and tolerable at B bytes/s (default 95000, BYTE_RATE_TOLERABLE)\n"
		"  --good-ms MS       or when answered within MS (default 3000, TIME_GOOD)\n"
		"  --tolerable-ms MS  and tolerable within MS (default 5000, TIME_TOLERABLE)\n"
		LOAD_RUN_USAGE);
}

static const struct option options[] = {
	{ "connections-per-port", required_argument, NULL, 'c' },
	{ "path", required_argument, NULL, 'P' },
	{ "expect-bytes", required_argument, NULL, 'e' },
	{ "files", required_argument, NULL, 'f' },
	{ "keepalive", no_argument, NULL, 'k' },
	{ "timeout-ms", required_argument, NULL, 't' },
	{ "good-rate", required_argument, NULL, 'g' },
	{ "tolerable-rate", required_argument, NULL, 'T' },
	{ "good-ms", required_argument, NULL, 'G' },
	{ "tolerable-ms", required_argument, NULL, 'M' },
	{ 0 },
};

static int http_option(struct load_run *r, int opt, const char *arg)
{
	struct httpload *h = r->priv;
	switch (opt) {
	case 'c': h->per_port = (unsigned)load_parse_number(NAME, "connections-per-port", arg, 1, 65536); break;
	case 'P': h->path = arg; break;
	case 'e': h->expect_bytes = load_parse_number(NAME, "expect-bytes", arg, 0, 1l << 40); break;
	case 'f': h->files_path = arg; break;
	case 'k': h->keepalive = 1; break;
	case 't': h->timeout_ns = (uint64_t)load_parse_number(NAME, "timeout-ms", arg, 1, 600000) * 1000000ull; break;
	case 'g': h->good_rate = (double)load_parse_number(NAME, "good-rate", arg, 1, 1l << 40); break;
	case 'T': h->tolerable_rate = (double)load_parse_number(NAME, "tolerable-rate", arg, 1, 1l << 40); break;
	case 'G': h->good_ns = (uint64_t)load_parse_number(NAME, "good-ms", arg, 0, 3600000) * 1000000ull; break;
	case 'M': h->tolerable_ns = (uint64_t)load_parse_number(NAME, "tolerable-ms", arg, 0, 3600000) * 1000000ull;
		break;
	default: return -1;
	}
	return 0;
}

/* The --files list: "WEIGHT BYTES PATH" a line; 0, or 2 after a message naming the line. */
static int read_files(struct httpload *h)
{
	FILE *f = fopen(h->files_path, "r");
	if (!f) {
		fprintf(stderr, NAME ": --files %s: %s\n", h->files_path, strerror(errno));
		return 2;
	}
	h->files = calloc(MAX_FILES, sizeof(*h->files));
	char line[512];
	unsigned lineno = 0;
	double total = 0;
	int status = h->files ? 0 : 1;
	while (!status && fgets(line, sizeof(line), f)) {
		lineno++;
		if (line[0] == '#' || line[0] == '\n')
			continue;
		double weight;
		long bytes;
		char path[256];
		if (h->nfiles == MAX_FILES || sscanf(line, "%lf %ld %255s", &weight, &bytes, path) != 3 ||
		    !(weight > 0) || bytes < 0 || path[0] != '/') {
			fprintf(stderr, NAME ": --files %s line %u: want \"WEIGHT BYTES /PATH\" (weight above 0, at most "
				"%d files)\n", h->files_path, lineno, MAX_FILES);
			status = 2;
			break;
		}
		struct file *file = &h->files[h->nfiles++];
		total += weight;
		*file = (struct file){ .bytes = bytes, .cumulative = total };
		memcpy(file->path, path, sizeof(file->path));
	}
	fclose(f);
	if (!status && !h->nfiles) {
		fprintf(stderr, NAME ": --files %s lists no file\n", h->files_path);
		status = 2;
	}
	if (status) {
		free(h->files);
		h->files = NULL;
	}
	return status;
}

/* The file set (one file with --path), checked once the host is known; per_port connections a port. */
static int http_prepare(struct load_run *r)
{
	struct httpload *h = r->priv;
	if (h->files_path) {
		int status = read_files(h);
		if (status)
			return status;
	} else {
		h->files = calloc(1, sizeof(*h->files));
		if (!h->files)
			return 1;
		h->nfiles = 1;
		h->files[0] = (struct file){ .bytes = h->expect_bytes, .cumulative = 1 };
		if (h->path[0] != '/' || strlen(h->path) >= sizeof(h->files[0].path)) {
			fprintf(stderr, NAME ": --path must start with / and be short\n");
			return 2;
		}
		strcpy(h->files[0].path, h->path);
	}
	if (strlen(r->host_name) > 64) {
		fprintf(stderr, NAME ": --host is too long\n");
		return 2;
	}
	r->nitems = r->nports * h->per_port;
	return 0;
}

static void init_conn(struct load_run *r, void *item, unsigned i, uint16_t port)
{
	struct conn *c = item;
	(void)r;
	(void)i;
	c->fd = -1;
	c->port = port;
}

static void free_conn(void *item)
{
	const struct conn *c = item;
	if (c->fd >= 0)
		close(c->fd);
}

static int http_finish(struct load_run *r, int status)
{
	struct httpload *h = r->priv;
	free(h->files);
	h->files = NULL;
	return status;
}

int main(int argc, char **argv)
{
	struct httpload h = { .per_port = 2, .path = "/index.html", .expect_bytes = -1, .timeout_ns = 5000000000ull,
			      .good_rate = 99000, .tolerable_rate = 95000, .good_ns = 3000000000ull,
			      .tolerable_ns = 5000000000ull };
	struct load_run r = {
		.name = NAME, .priv = &h,
		.options = options, .option = http_option, .usage = usage,
		.prepare = http_prepare, .thread_priv_size = sizeof(struct http_thread),
		.item_size = sizeof(struct conn), .init_item = init_conn, .free_item = free_conn,
		.thread_fn = http_thread, .issue = http_issue, .describe = describe, .finish = http_finish,
	};
	return load_main(argc, argv, &r);
}
