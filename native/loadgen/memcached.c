/*
 * mosbench-memload: the paper's memcached client (section 5.3), over UDP.
 *
 * Each client context owns a UDP socket connected to one server port and repeatedly sends a batch of
 * gets (default 20) for a key that does not exist, then waits for every reply or for the time-out
 * (default 100 ms) after which the missing ones count as lost. Contexts are spread evenly over the
 * ports and over the threads, a thread per load-generator CPU, each serving its contexts from one
 * epoll set with sendmmsg/recvmmsg. Open loop (--rate), a batch is one issue: a context whose batch is
 * complete waits for the next batch due, and each reply's latency counts from the batch's intended time.
 *
 * The request is the paper's 68-byte frame: Ethernet, IP and UDP headers around a 22-byte payload,
 * memcached's 8-byte UDP frame header and "get <8-character key>\r\n". A miss is answered with
 * "END\r\n", which pads to the 64-byte minimum frame: the paper's 64-byte reply. Work is counted from
 * replies, never from requests: a reply other than END (an error, a value) fails the run.
 */
#include "run.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define NAME "mosbench-memload"
#define MAX_BATCH 64
#define KEY_LEN 8
#define FRAME_HEADER 8
#define REQUEST_LEN (FRAME_HEADER + 4 + KEY_LEN + 2)
#define MISS_REPLY "END\r\n"
#define RECV_BATCH 64
#define REPLY_MAX 1500

struct context {
	int fd;
	uint16_t port;
	uint16_t first_id;	/* request id of the batch's first request */
	uint64_t pending;	/* bit i: request first_id + i not answered yet */
	uint64_t intended_ns;	/* when the batch was due: its replies' latency counts from here */
	uint64_t sent_ns;	/* when it went out: its time-out counts from here */
	uint32_t batch_no;
	char request[REQUEST_LEN];
};

struct memload {
	unsigned per_port;	/* contexts per server port */
	unsigned batch;
	uint64_t timeout_ns;
	uint16_t *source_ports;	/* --source-ports: context i's own, chosen to spread flows over NIC queues */
	unsigned nsource_ports;
};

static void put_be16(char *p, uint16_t v)
{
	p[0] = (char)(v >> 8);
	p[1] = (char)v;
}

static uint16_t get_be16(const unsigned char *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static int send_batch(struct load_thread *t, const struct memload *m, struct context *c, uint64_t intended_ns)
{
	char frames[MAX_BATCH][REQUEST_LEN];
	struct iovec iov[MAX_BATCH];
	struct mmsghdr msgs[MAX_BATCH];
	c->batch_no++;
	c->first_id = (uint16_t)(c->batch_no * m->batch);
	for (unsigned i = 0; i < m->batch; i++) {
		memcpy(frames[i], c->request, REQUEST_LEN);
		put_be16(frames[i], (uint16_t)(c->first_id + i));
		iov[i] = (struct iovec){ frames[i], REQUEST_LEN };
		msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 } };
	}
	c->intended_ns = intended_ns;
	c->sent_ns = load_now_ns();
	c->pending = m->batch == 64 ? ~0ull : (1ull << m->batch) - 1;
	unsigned done = 0;
	while (done < m->batch) {
		int n = sendmmsg(c->fd, msgs + done, m->batch - done, 0);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN || errno == ENOBUFS)
				continue;
			if (errno == ECONNREFUSED) {
				/* An ICMP port-unreachable from an earlier send: the server is not there. */
				load_fail(&t->run->stats, NAME ": %s:%u refused: is memcached running?", t->run->host_name, c->port);
				return -1;
			}
			load_fail(&t->run->stats, NAME ": sendmmsg to port %u: %s", c->port, strerror(errno));
			return -1;
		}
		done += (unsigned)n;
	}
	load_count(t, LC_SENT, m->batch);
	return 0;
}

static int receive(struct load_thread *t, const struct memload *m, struct context *c)
{
	static _Thread_local unsigned char bufs[RECV_BATCH][REPLY_MAX];
	struct iovec iov[RECV_BATCH];
	struct mmsghdr msgs[RECV_BATCH];
	for (;;) {
		for (int i = 0; i < RECV_BATCH; i++) {
			iov[i] = (struct iovec){ bufs[i], REPLY_MAX };
			msgs[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 } };
		}
		int n = recvmmsg(c->fd, msgs, RECV_BATCH, MSG_DONTWAIT, NULL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			if (errno == ECONNREFUSED) {
				load_fail(&t->run->stats, NAME ": %s:%u refused: is memcached running?", t->run->host_name, c->port);
				return -1;
			}
			load_fail(&t->run->stats, NAME ": recvmmsg from port %u: %s", c->port, strerror(errno));
			return -1;
		}
		uint64_t now = load_now_ns();
		uint64_t answered = 0;
		for (int i = 0; i < n; i++) {
			const unsigned char *r = bufs[i];
			unsigned len = msgs[i].msg_len;
			if (len != FRAME_HEADER + sizeof(MISS_REPLY) - 1 ||
			    memcmp(r + FRAME_HEADER, MISS_REPLY, sizeof(MISS_REPLY) - 1)) {
				load_count(t, LC_ERRORS, 1);
				unsigned show = len > FRAME_HEADER ? len - FRAME_HEADER : 0;
				if (show > 40)
					show = 40;
				load_fail(&t->run->stats, NAME ": port %u answered a get of a missing key with '%.*s' (%u bytes)",
					  c->port, (int)strcspn((const char *)r + FRAME_HEADER, "\r\n") < (int)show ?
					  (int)strcspn((const char *)r + FRAME_HEADER, "\r\n") : (int)show,
					  (const char *)r + FRAME_HEADER, len);
				continue;
			}
			uint16_t offset = (uint16_t)(get_be16(r) - c->first_id);
			if (offset < m->batch && (c->pending >> offset & 1)) {
				c->pending &= ~(1ull << offset);
				answered++;
				load_latency(t, now - c->intended_ns);
			} else {
				load_count(t, LC_LATE, 1);
			}
		}
		load_count(t, LC_DONE, answered);
		/* Only the reply that completes the batch frees the context: one coming to a context already
		 * idle (open loop, a batch that timed out) is late, and must not free it twice. */
		if (answered && !c->pending)
			return load_next(t, c);
		if (n < RECV_BATCH)
			return 0;
	}
}

/* The run's issue hook: the context's next batch, due at intended_ns. */
static int memload_issue(struct load_thread *t, void *item, uint64_t intended_ns)
{
	return send_batch(t, t->run->priv, item, intended_ns);
}

static int memload_event(struct load_thread *t, void *item, uint32_t events)
{
	(void)events;
	return receive(t, t->run->priv, item);
}

/* Batches whose replies did not all come back in time (from when they went out, not from when they were
 * due): the rest are lost, and the context is free for its next batch. An idle context has none pending. */
static int memload_scan(struct load_thread *t, uint64_t now)
{
	const struct memload *m = t->run->priv;
	for (unsigned i = 0; i < t->nitems; i++) {
		struct context *c = t->items[i];
		if (c->pending && now - c->sent_ns >= m->timeout_ns) {
			load_count(t, LC_LOST, (uint64_t)__builtin_popcountll(c->pending));
			c->pending = 0;
			if (load_next(t, c))
				return -1;
		}
	}
	return 0;
}

static void *memload_thread(struct load_thread *t)
{
	if (load_start_items(t))
		return NULL;
	load_epoll_loop(t, memload_event, memload_scan);
	return NULL;
}

static int open_context(const struct load_run *r, struct context *c, unsigned index)
{
	const struct memload *m = r->priv;
	c->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return errno;
	if (m->source_ports) {
		struct sockaddr_in from = { .sin_family = AF_INET, .sin_port = htons(m->source_ports[index]) };
		if (bind(c->fd, (struct sockaddr *)&from, sizeof(from)))
			return errno;
	}
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(c->port), .sin_addr = r->host };
	if (connect(c->fd, (struct sockaddr *)&to, sizeof(to)))
		return errno;
	memset(c->request, 0, FRAME_HEADER);
	put_be16(c->request + 4, 1); /* one datagram in this request */
	char key[KEY_LEN + 1];
	snprintf(key, sizeof(key), "m%07x", index & 0xfffffff);
	memcpy(c->request + FRAME_HEADER, "get ", 4);
	memcpy(c->request + FRAME_HEADER + 4, key, KEY_LEN);
	memcpy(c->request + FRAME_HEADER + 4 + KEY_LEN, "\r\n", 2);
	return 0;
}

static void describe(struct load_run *r, FILE *out)
{
	const struct memload *m = r->priv;
	fprintf(out, "\"contexts\": %u, \"ports\": %u, \"batch\": %u, \"timeout_ms\": %.0f, \"request_bytes\": %d",
		r->nitems, r->nports, m->batch, (double)m->timeout_ns / 1e6, REQUEST_LEN);
	/* Every flow's addresses and ports, as the server's NIC hashes them (its receive side: from us). */
	fputs(",\n \"flows\": [", out);
	for (unsigned i = 0; i < r->nitems; i++) {
		const struct context *c = (const struct context *)r->items + i;
		struct sockaddr_in self;
		socklen_t len = sizeof(self);
		char addr[INET_ADDRSTRLEN] = "0.0.0.0";
		if (c->fd < 0 || getsockname(c->fd, (struct sockaddr *)&self, &len))
			continue;
		inet_ntop(AF_INET, &self.sin_addr, addr, sizeof(addr));
		fprintf(out, "%s[\"%s\", %u, \"%s\", %u]", i ? ", " : "", addr, ntohs(self.sin_port), r->host_name,
			c->port);
	}
	fputc(']', out);
}

static void usage(void)
{
	fprintf(stderr, "usage: " NAME " --ports LIST --cpus LIST [--contexts-per-port N] [--batch N]\n"
		"                        [--timeout-ms MS] [options]\n"
		"  --contexts-per-port N   client contexts per port, each with a batch in flight (default 8)\n"
		"  --batch N          gets per batch (default 20, at most %d)\n"
		"  --timeout-ms MS    a batch's replies not back by then are lost (default 100)\n"
		"  --source-ports LIST  each context's source port, in order (default: the kernel's)\n"
		LOAD_RUN_USAGE, MAX_BATCH);
}

static const struct option options[] = {
	{ "contexts-per-port", required_argument, NULL, 'c' },
	{ "batch", required_argument, NULL, 'b' },
	{ "timeout-ms", required_argument, NULL, 't' },
	{ "source-ports", required_argument, NULL, 's' },
	{ 0 },
};

static int memload_option(struct load_run *r, int opt, const char *arg)
{
	struct memload *m = r->priv;
	switch (opt) {
	case 'c': m->per_port = load_parse_number(NAME, "contexts-per-port", arg, 1, 4096); break;
	case 'b':
		m->batch = load_parse_number(NAME, "batch", arg, 1, MAX_BATCH);
		/* Here, not in prepare: load_main sets the open loop's pace from it before prepare. */
		r->per_issue = m->batch;
		break;
	case 't': m->timeout_ns = load_parse_number(NAME, "timeout-ms", arg, 1, 60000) * 1000000ull; break;
	case 's':
		free(m->source_ports);
		if (load_parse_ports(arg, &m->source_ports, &m->nsource_ports)) {
			fprintf(stderr, NAME ": bad --source-ports '%s'\n", arg);
			exit(2);
		}
		break;
	default: return -1;
	}
	return 0;
}

static int memload_prepare(struct load_run *r)
{
	const struct memload *m = r->priv;
	r->nitems = r->nports * m->per_port;
	if (m->source_ports && m->nsource_ports != r->nitems) {
		fprintf(stderr, NAME ": --source-ports gives %u ports for %u contexts\n", m->nsource_ports, r->nitems);
		return 2;
	}
	return 0;
}

static void init_context(struct load_run *r, void *item, unsigned i, uint16_t port)
{
	struct context *c = item;
	(void)r;
	(void)i;
	c->fd = -1;
	c->port = port;
}

/* Each context's socket, in its thread's epoll set (context i is thread i mod threads'). */
static int open_contexts(struct load_run *r)
{
	for (unsigned i = 0; i < r->nitems; i++) {
		struct context *c = (struct context *)r->items + i;
		int err = open_context(r, c, i);
		if (err) {
			fprintf(stderr, NAME ": socket to port %u: %s\n", c->port, strerror(err));
			return 1;
		}
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
		if (epoll_ctl(r->threads[i % r->nthreads].epfd, EPOLL_CTL_ADD, c->fd, &ev)) {
			fprintf(stderr, NAME ": epoll_ctl: %s\n", strerror(errno));
			return 1;
		}
	}
	return 0;
}

static void free_context(void *item)
{
	const struct context *c = item;
	if (c->fd >= 0)
		close(c->fd);
}

int main(int argc, char **argv)
{
	struct memload m = { .per_port = 8, .batch = 20, .timeout_ns = 100000000ull };
	struct load_run r = {
		.name = NAME, .priv = &m,
		.options = options, .option = memload_option, .usage = usage,
		.prepare = memload_prepare,
		.item_size = sizeof(struct context), .init_item = init_context, .open_items = open_contexts,
		.free_item = free_context,
		.thread_fn = memload_thread, .describe = describe,
		.issue = memload_issue, .per_issue = m.batch, /* a batch is one issue; --batch updates it */
	};
	int status = load_main(argc, argv, &r);
	free(m.source_ports);
	return status;
}
