/*
 * mosbench-httpload: the paper's Apache client (section 5.4): HTTP GETs of one static file.
 *
 * Each connection slot repeatedly connects, sends a GET, reads the whole response and checks it
 * (status 200, Content-Length and body of the expected size), then, by default, waits for the
 * server to close and opens a new connection for the next request: one connection per request, as
 * the paper ran Apache. With --keepalive a slot keeps its connection for every request (one the
 * server lets go before answering is opened again and the request resent; "sent" counts both). Slots are
 * spread evenly over the ports and over the threads (a thread per load-generator CPU, one epoll set
 * each). A request not answered within --timeout-ms is lost and its connection reset.
 */
#include "run.h"

#include <arpa/inet.h>
#include <errno.h>
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

enum conn_state { CONNECTING, SENDING, READING, DRAINING };

struct conn {
	int fd;
	uint16_t port;
	enum conn_state state;
	uint64_t started_ns;	/* the request's start: its connect, or its send on a kept connection */
	size_t sent;
	size_t have;
	int reused;		/* a kept connection that has answered before */
	char buf[BUF_SIZE];
};

struct httpload {
	unsigned per_port;
	const char *path;
	long expect_bytes;	/* body length every response must have; -1: any */
	int keepalive;
	uint64_t timeout_ns;
	char request[512];
	size_t request_len;
};

static int start_request(struct load_thread *t, const struct httpload *h, struct conn *c);

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

static int start_request(struct load_thread *t, const struct httpload *h, struct conn *c)
{
	if (!h->keepalive || c->fd < 0)
		return reconnect(t, c);
	c->started_ns = load_now_ns();
	c->sent = c->have = 0;
	c->reused = 1;
	c->state = SENDING;
	load_watch(t, c->fd, c, EPOLLOUT);
	return 0;
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

/* A complete response in c->buf: 1, incomplete: 0, malformed or wrong: -1 (after failing the run). */
static int parse_response(struct load_thread *t, const struct httpload *h, struct conn *c, size_t *used)
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
		load_fail(&t->run->stats, NAME ": port %u answered '%.*s'", c->port, line > 80 ? 80 : line, c->buf);
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
	if (h->expect_bytes >= 0 && length != h->expect_bytes) {
		load_count(t, LC_ERRORS, 1);
		load_fail(&t->run->stats, NAME ": port %u sent a body of %ld bytes, %ld expected", c->port, length,
			  h->expect_bytes);
		return -1;
	}
	if (header_len + (size_t)length > BUF_SIZE) {
		load_fail(&t->run->stats, NAME ": a %ld-byte body does not fit the client's buffer", length);
		return -1;
	}
	if (c->have < header_len + (size_t)length)
		return 0;
	*used = header_len + (size_t)length;
	return 1;
}

static int on_event(struct load_thread *t, const struct httpload *h, struct conn *c, uint32_t events)
{
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
		ssize_t n = send(c->fd, h->request + c->sent, h->request_len - c->sent, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN)
				return 0;
			if ((errno == EPIPE || errno == ECONNRESET) && closed_unanswered(c))
				return reconnect(t, c);
			load_fail(&t->run->stats, NAME ": send to port %u: %s", c->port, strerror(errno));
			return -1;
		}
		c->sent += (size_t)n;
		if (c->sent < h->request_len)
			return 0;
		load_count(t, LC_SENT, 1);
		c->state = READING;
		load_watch(t, c->fd, c, EPOLLIN);
		return 0;
	}
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return 0;
	for (;;) {
		char sink[512];
		char *into = c->state == DRAINING ? sink : c->buf + c->have;
		size_t room = c->state == DRAINING ? sizeof(sink) : BUF_SIZE - c->have;
		ssize_t n = recv(c->fd, into, room, 0);
		if (n < 0) {
			if (errno == EAGAIN)
				return 0;
			if (errno == ECONNRESET && c->state == DRAINING)
				return start_request(t, h, c);
			if (errno == ECONNRESET && closed_unanswered(c))
				return reconnect(t, c);
			load_fail(&t->run->stats, NAME ": recv from port %u: %s", c->port, strerror(errno));
			return -1;
		}
		if (n == 0) {
			if (c->state == DRAINING)	/* the server closed: the next request gets a new connection */
				return start_request(t, h, c);
			if (closed_unanswered(c))
				return reconnect(t, c);
			load_fail(&t->run->stats, NAME ": port %u closed the connection mid-response", c->port);
			return -1;
		}
		if (c->state == DRAINING) {
			load_fail(&t->run->stats, NAME ": port %u sent bytes after a complete response", c->port);
			return -1;
		}
		c->have += (size_t)n;
		size_t used = 0;
		int done = parse_response(t, h, c, &used);
		if (done < 0)
			return -1;
		if (!done)
			continue;
		load_latency(t, load_now_ns() - c->started_ns);
		load_count(t, LC_DONE, 1);
		if (h->keepalive)
			return start_request(t, h, c);
		c->state = DRAINING;
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
		if (c->state != DRAINING && now - c->started_ns >= h->timeout_ns) {
			load_count(t, LC_LOST, 1);
			if (reconnect(t, c))
				return -1;
		}
	}
	return 0;
}

static void *http_thread(struct load_thread *t)
{
	for (unsigned i = 0; i < t->nitems; i++)
		if (reconnect(t, t->items[i]))
			return NULL;
	load_epoll_loop(t, http_event, http_scan);
	return NULL;
}

static void describe(struct load_run *r, FILE *out)
{
	const struct httpload *h = r->priv;
	fprintf(out, "\"connections\": %u, \"ports\": %u, \"keepalive\": %s, \"timeout_ms\": %.0f",
		r->nitems, r->nports, h->keepalive ? "true" : "false", (double)h->timeout_ns / 1e6);
}

static void usage(void)
{
	fprintf(stderr, "usage: " NAME " --ports LIST --cpus LIST [--connections-per-port N] [--path P]\n"
		"                         [--expect-bytes N] [--keepalive] [--timeout-ms MS] [options]\n"
		"  --connections-per-port N   concurrent connections per port (default 2)\n"
		"  --path P           the file to GET (default /index.html)\n"
		"  --expect-bytes N   every body must be N bytes (default: any)\n"
		"  --keepalive        every request on one kept connection (default: a connection each)\n"
		"  --timeout-ms MS    a request not answered by then is lost (default 5000)\n"
		LOAD_RUN_USAGE);
}

static const struct option options[] = {
	{ "connections-per-port", required_argument, NULL, 'c' },
	{ "path", required_argument, NULL, 'P' },
	{ "expect-bytes", required_argument, NULL, 'e' },
	{ "keepalive", no_argument, NULL, 'k' },
	{ "timeout-ms", required_argument, NULL, 't' },
	{ 0 },
};

static int http_option(struct load_run *r, int opt, const char *arg)
{
	struct httpload *h = r->priv;
	switch (opt) {
	case 'c': h->per_port = (unsigned)load_parse_number(NAME, "connections-per-port", arg, 1, 65536); break;
	case 'P': h->path = arg; break;
	case 'e': h->expect_bytes = load_parse_number(NAME, "expect-bytes", arg, 0, BUF_SIZE / 2); break;
	case 'k': h->keepalive = 1; break;
	case 't': h->timeout_ns = (uint64_t)load_parse_number(NAME, "timeout-ms", arg, 1, 600000) * 1000000ull; break;
	default: return -1;
	}
	return 0;
}

/* The request every connection sends, once the host is known; per_port connections on every port. */
static int http_prepare(struct load_run *r)
{
	struct httpload *h = r->priv;
	int len = snprintf(h->request, sizeof(h->request), "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", h->path,
			   r->host_name, h->keepalive ? "" : "Connection: close\r\n");
	if (len < 0 || (size_t)len >= sizeof(h->request) || h->path[0] != '/') {
		fprintf(stderr, NAME ": --path must start with / and be short\n");
		return 2;
	}
	h->request_len = (size_t)len;
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

int main(int argc, char **argv)
{
	struct httpload h = { .per_port = 2, .path = "/index.html", .expect_bytes = -1, .timeout_ns = 5000000000ull };
	struct load_run r = {
		.name = NAME, .priv = &h,
		.options = options, .option = http_option, .usage = usage,
		.prepare = http_prepare,
		.item_size = sizeof(struct conn), .init_item = init_conn, .free_item = free_conn,
		.thread_fn = http_thread, .describe = describe,
	};
	return load_main(argc, argv, &r);
}
