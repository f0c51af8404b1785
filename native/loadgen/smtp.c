/*
 * mosbench-smtpload: the paper's Exim client (section 5.2): SMTP sessions that never stop sending mail.
 *
 * A fixed number of sessions (the paper's client processes; 96 by default, whatever the core count),
 * each in turn: connect, HELO, then --messages-per-connection times MAIL FROM, RCPT TO its own user,
 * DATA and a message with a 20-byte body, each command waiting for its reply (no pipelining, as the
 * paper's client), then QUIT and a new connection. QUIT is sent, the write side shut, and only then
 * the reply read: a client that waits for the reply first stalls on Exim's lingering close.
 *
 * Every message carries its session and a sequence number ("00042.00000000000017"). At the end a
 * ledger lists, per session, the numbers the server accepted (250 after the data) and the ones whose
 * fate is unknown (time-outs), so the harness can check every accepted message reached the session's
 * mailbox exactly once. Work counted here is acceptance; the harness counts deliveries.
 *
 * Open loop (--rate), a message is one issue. A session ready for its next message (HELO answered, or
 * the last message accepted with more left for the connection) waits idle for a message due; its latency
 * counts from when it was due. Connecting, HELO and QUIT stay outside the schedule. An idle session has
 * no step under way, so no time-out runs; a server may close it (or say 421 first), and it reconnects.
 */
#include "run.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define NAME "mosbench-smtpload"
#define IN_SIZE 2048
#define OUT_SIZE 512
#define MAX_SESSIONS 65536 /* the body's session field has five digits */
/* Open loop: a message whose MAIL FROM met the server closing its connection idle this many times in a
 * row fails the run (a server that closes every connection at MAIL FROM), rather than reconnect forever. */
#define MAX_IDLE_RETRIES 3

/* IDLE: connected and greeted, waiting for a message due (open loop only: closed loop, a message goes at once). */
enum step { CONNECTING, GREETING, HELO, IDLE, MAIL, RCPT, DATA, MESSAGE, QUIT, CLOSING };
static const char *const step_names[] = { "connect", "greeting", "HELO", "its turn (idle)", "MAIL FROM", "RCPT TO",
					  "DATA", "the message", "QUIT", "close" };
static const int expected_code[] = { 0, 220, 250, 0, 250, 250, 354, 250, 221, 0 };

struct range {
	uint64_t start, end; /* [start, end) */
};

struct session {
	int fd;
	unsigned id;
	uint16_t port;
	enum step step;
	unsigned sent_on_conn;
	uint64_t conn_started_ns, msg_started_ns, step_started_ns;
	uint64_t seq;		/* the next (or the in-flight) message's number */
	int in_flight;		/* the message `seq` was sent, its reply not read */
	/* Open loop: `waiting`, given to load_next and not yet issued (on the thread's idle list, whatever
	 * its step: a server may close an idle connection); `owed`, issued while reconnecting, so its
	 * message goes, due at owed_ns, once HELO is answered. */
	bool waiting, owed;
	uint64_t owed_ns;
	bool after_idle;	/* open loop: MAIL FROM went on a connection that may have sat idle, unanswered */
	unsigned idle_retries;	/* times this message's MAIL FROM met an idle close */
	size_t out_len, out_sent;
	size_t in_have;
	char out[OUT_SIZE];
	char in[IN_SIZE];
	struct range *accepted;
	size_t naccepted, accepted_cap;
	uint64_t *uncertain;
	size_t nuncertain, uncertain_cap;
};

struct smtpload {
	unsigned nsessions;
	unsigned first_session; /* several hosts' generators mail disjoint users */
	unsigned per_conn;
	const char *domain;
	uint64_t timeout_ns;
	const char *ledger_path;
};

struct smtp_thread {
	struct hist connection; /* connect to close, window only */
};

static int grow(void **v, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap * 2 : 16;
	void *p = realloc(*v, n * size);
	if (!p)
		return -1;
	*v = p;
	*cap = n;
	return 0;
}

static int note_accepted(struct session *s)
{
	if (s->naccepted && s->accepted[s->naccepted - 1].end == s->seq) {
		s->accepted[s->naccepted - 1].end++;
		return 0;
	}
	if (grow((void **)&s->accepted, &s->accepted_cap, s->naccepted + 1, sizeof(*s->accepted)))
		return -1;
	s->accepted[s->naccepted++] = (struct range){ s->seq, s->seq + 1 };
	return 0;
}

static int note_uncertain(struct session *s)
{
	if (grow((void **)&s->uncertain, &s->uncertain_cap, s->nuncertain + 1, sizeof(*s->uncertain)))
		return -1;
	s->uncertain[s->nuncertain++] = s->seq;
	return 0;
}

static void closed(struct load_thread *t, struct session *s)
{
	struct smtp_thread *st = t->priv;
	if (t->in_window)
		hist_record(&st->connection, load_now_ns() - s->conn_started_ns);
}

/*
 * Whether the server closing the connection (or saying 421) now is its closing an idle connection as
 * the MAIL FROM after the idle wait (or the reconnect) went out: SMTP has no way to avoid that race.
 * Nothing is accepted before MAIL FROM's reply, so the message is owed, to go on the next connection.
 */
static bool closed_idle(struct session *s)
{
	if (s->step != MAIL || !s->after_idle)
		return false;
	s->after_idle = false;
	s->idle_retries++;
	s->owed = true;
	s->owed_ns = s->msg_started_ns;
	return true;
}

static int connect_session(struct load_thread *t, struct session *s)
{
	if (s->fd >= 0)
		close(s->fd); /* also leaves the epoll set */
	s->conn_started_ns = s->step_started_ns = load_now_ns();
	s->sent_on_conn = 0;
	s->after_idle = false;
	s->in_have = s->out_len = s->out_sent = 0;
	s->step = CONNECTING;
	s->fd = load_tcp_connect(t, s->port, s);
	return s->fd < 0 ? -1 : 0;
}

/* Sends what is queued; the rest goes when the socket is writable again. */
static int flush(struct load_thread *t, struct session *s)
{
	while (s->out_sent < s->out_len) {
		ssize_t n = send(s->fd, s->out + s->out_sent, s->out_len - s->out_sent, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN) {
				load_watch(t, s->fd, s, EPOLLIN | EPOLLOUT);
				return 0;
			}
			if ((errno == EPIPE || errno == ECONNRESET) && closed_idle(s)) {
				closed(t, s);
				return connect_session(t, s);
			}
			load_fail(&t->run->stats, NAME ": send %s to port %u: %s", step_names[s->step], s->port,
				  strerror(errno));
			return -1;
		}
		s->out_sent += (size_t)n;
	}
	if (s->step == QUIT)
		shutdown(s->fd, SHUT_WR); /* then read the reply: see the top of the file */
	load_watch(t, s->fd, s, EPOLLIN);
	return 0;
}

static int say(struct load_thread *t, struct session *s, enum step next, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int say(struct load_thread *t, struct session *s, enum step next, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(s->out, sizeof(s->out), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(s->out)) {
		load_fail(&t->run->stats, NAME ": a command does not fit %d bytes (--domain too long?)", OUT_SIZE);
		return -1;
	}
	s->out_len = (size_t)n;
	s->out_sent = 0;
	s->step = next;
	s->step_started_ns = load_now_ns();
	return flush(t, s);
}

/* The message's latency counts from intended_ns, its steps' time-outs from when each went out. Open loop,
 * every MAIL FROM follows a wait the server may count as idle (for its turn, or between HELO and a message
 * owed); closed loop, none does. */
static int send_mail_from(struct load_thread *t, const struct smtpload *g, struct session *s, uint64_t intended_ns)
{
	s->msg_started_ns = intended_ns;
	s->after_idle = t->run->rate > 0 && s->idle_retries < MAX_IDLE_RETRIES;
	return say(t, s, MAIL, "MAIL FROM:<client@%s>\r\n", g->domain);
}

/* The session is ready for its next message: closed loop, it goes now; open loop, when one is due. */
static int ready(struct load_thread *t, const struct smtpload *g, struct session *s)
{
	if (s->owed) {
		s->owed = false;
		return send_mail_from(t, g, s, s->owed_ns);
	}
	s->step = IDLE;
	if (s->waiting)
		return 0; /* reconnected while on the idle list: it stays there */
	s->waiting = true;
	return load_next(t, s);
}

/* The run's issue hook: the session's next message, due at intended_ns. */
static int smtp_issue(struct load_thread *t, void *item, uint64_t intended_ns)
{
	struct session *s = item;
	s->waiting = false;
	if (s->step == IDLE)
		return send_mail_from(t, t->run->priv, s, intended_ns);
	/* Reconnecting after the server closed it idle: the message goes once HELO is answered, its
	 * latency still from intended_ns. */
	s->owed = true;
	s->owed_ns = intended_ns;
	return 0;
}

static int on_reply(struct load_thread *t, const struct smtpload *g, struct session *s, int code, const char *line,
		    size_t len)
{
	if (code == 421 && (s->step == IDLE || closed_idle(s))) {
		/* The server is closing an idle connection (Exim's smtp_receive_timeout): wait for its
		 * close, as after QUIT, then reconnect. */
		s->step = CLOSING;
		s->step_started_ns = load_now_ns();
		return 0;
	}
	if (code != expected_code[s->step]) {
		load_count(t, LC_ERRORS, 1);
		load_fail(&t->run->stats, NAME ": port %u answered '%.*s' to %s", s->port, (int)(len > 120 ? 120 : len),
			  line, step_names[s->step]);
		return -1;
	}
	switch (s->step) {
	case GREETING:
		return say(t, s, HELO, "HELO mosbench-smtpload\r\n");
	case HELO:
		return ready(t, g, s);
	case MAIL:
		s->after_idle = false;
		s->idle_retries = 0;
		return say(t, s, RCPT, "RCPT TO:<u%05u@%s>\r\n", s->id, g->domain);
	case RCPT:
		return say(t, s, DATA, "DATA\r\n");
	case DATA:
		s->in_flight = 1;
		load_count(t, LC_SENT, 1);
		return say(t, s, MESSAGE, "From: <client@%s>\r\nTo: <u%05u@%s>\r\nSubject: mosbench\r\n\r\n"
			   "%05u.%014" PRIu64 "\r\n.\r\n", g->domain, s->id, g->domain, s->id, s->seq);
	case MESSAGE:
		if (note_accepted(s)) {
			load_fail(&t->run->stats, NAME ": out of memory for the ledger");
			return -1;
		}
		s->seq++;
		s->in_flight = 0;
		load_latency(t, load_now_ns() - s->msg_started_ns);
		load_count(t, LC_DONE, 1);
		if (++s->sent_on_conn < g->per_conn)
			return ready(t, g, s);
		return say(t, s, QUIT, "QUIT\r\n");
	case QUIT:
		s->step = CLOSING; /* the server closes; then a new connection */
		s->step_started_ns = load_now_ns();
		return 0;
	default:
		load_fail(&t->run->stats, NAME ": port %u sent '%.*s' unasked", s->port, (int)(len > 120 ? 120 : len),
			  line);
		return -1;
	}
}

/* Consumes complete reply lines; a reply ends at a line whose code is followed by a space (or nothing). */
static int read_replies(struct load_thread *t, const struct smtpload *g, struct session *s)
{
	size_t at = 0;
	for (;;) {
		char *eol = memmem(s->in + at, s->in_have - at, "\r\n", 2);
		if (!eol)
			break;
		char *line = s->in + at;
		size_t len = (size_t)(eol - line);
		at += len + 2;
		if (len > 3 && line[3] == '-')
			continue; /* a continuation line */
		int code = -1;
		if (len >= 3 && isdigit((unsigned char)line[0]) && isdigit((unsigned char)line[1]) &&
		    isdigit((unsigned char)line[2]))
			code = (line[0] - '0') * 100 + (line[1] - '0') * 10 + (line[2] - '0');
		if (on_reply(t, g, s, code, line, len))
			return -1;
	}
	if (at == 0 && s->in_have == IN_SIZE) {
		load_fail(&t->run->stats, NAME ": port %u sent a line longer than %d bytes", s->port, IN_SIZE);
		return -1;
	}
	memmove(s->in, s->in + at, s->in_have - at);
	s->in_have -= at;
	return 0;
}

static int on_event(struct load_thread *t, const struct smtpload *g, struct session *s, uint32_t events)
{
	if (s->step == CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);
		getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			load_fail(&t->run->stats, NAME ": connect to %s:%u: %s", t->run->host_name, s->port,
				  strerror(err));
			return -1;
		}
		s->step = GREETING;
		s->step_started_ns = load_now_ns();
		load_watch(t, s->fd, s, EPOLLIN);
		return 0;
	}
	if ((events & EPOLLOUT) && s->out_sent < s->out_len) {
		if (flush(t, s))
			return -1;
		if (s->step == CONNECTING)
			return 0; /* flush found an idle connection closed (closed_idle): a new one */
	}
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return 0;
	for (;;) {
		ssize_t n = recv(s->fd, s->in + s->in_have, IN_SIZE - s->in_have, 0);
		if (n < 0) {
			if (errno == EAGAIN)
				return 0;
			if (errno == ECONNRESET &&
			    (s->step == CLOSING || s->step == IDLE || (s->step == MAIL && s->after_idle)))
				n = 0;
			else {
				load_fail(&t->run->stats, NAME ": recv from port %u waiting for %s: %s", s->port,
					  step_names[s->step], strerror(errno));
				return -1;
			}
		}
		if (n == 0) {
			/* After QUIT, or while idle (a server may close a connection left unused): reconnect.
			 * Otherwise the server gave up mid-exchange: a failure. */
			if (s->step != CLOSING && s->step != IDLE && !closed_idle(s)) {
				load_fail(&t->run->stats, NAME ": port %u closed the connection waiting for %s", s->port,
					  step_names[s->step]);
				return -1;
			}
			closed(t, s);
			return connect_session(t, s);
		}
		s->in_have += (size_t)n;
		if (read_replies(t, g, s))
			return -1;
	}
}

/* A step unanswered in time: its message (if one was out) may or may not arrive, so it is noted as such.
 * A message owed (open loop, due while the session reconnected) is given up, counted lost. */
static int timed_out(struct load_thread *t, struct session *s)
{
	if ((s->step != QUIT && s->step != CLOSING) || s->owed)
		load_count(t, LC_LOST, 1);
	s->owed = false;
	s->idle_retries = 0;
	if (s->in_flight) {
		if (note_uncertain(s)) {
			load_fail(&t->run->stats, NAME ": out of memory for the ledger");
			return -1;
		}
		s->seq++;
		s->in_flight = 0;
	}
	return connect_session(t, s);
}

static int smtp_event(struct load_thread *t, void *item, uint32_t events)
{
	return on_event(t, t->run->priv, item, events);
}

static int smtp_scan(struct load_thread *t, uint64_t now)
{
	const struct smtpload *g = t->run->priv;
	for (unsigned i = 0; i < t->nitems; i++) {
		struct session *s = t->items[i];
		/* An idle session waits for its turn, not for the server. */
		if (s->step != IDLE && now - s->step_started_ns >= g->timeout_ns && timed_out(t, s))
			return -1;
	}
	return 0;
}

/* Every session connects at once; each goes to load_next when its HELO is answered. */
static void *smtp_thread(struct load_thread *t)
{
	for (unsigned i = 0; i < t->nitems; i++)
		if (connect_session(t, t->items[i]))
			return NULL;
	load_epoll_loop(t, smtp_event, smtp_scan);
	return NULL;
}

static void describe(struct load_run *r, FILE *out)
{
	const struct smtpload *g = r->priv;
	struct hist *conn = malloc(sizeof(*conn));
	fprintf(out, "\"sessions\": %u, \"messages_per_connection\": %u, \"ports\": %u, \"timeout_ms\": %.0f",
		g->nsessions, g->per_conn, r->nports, (double)g->timeout_ns / 1e6);
	if (!conn)
		return;
	hist_init(conn);
	for (unsigned i = 0; i < r->nthreads; i++)
		hist_merge(conn, &((struct smtp_thread *)r->threads[i].priv)->connection);
	fputs(",\n ", out);
	load_write_latency(out, "connection_ns", conn);
	free(conn);
}

/* {"sessions": [{"user": "u00000", "next": N, "accepted": [[a, b], ...], "uncertain": [n, ...]}, ...]} */
static int write_ledger(const struct smtpload *g, const struct session *sessions)
{
	char tmp[4096];
	if (snprintf(tmp, sizeof(tmp), "%s.new", g->ledger_path) >= (int)sizeof(tmp))
		return -1;
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -1;
	fputs("{\"sessions\": [", f);
	for (unsigned i = 0; i < g->nsessions; i++) {
		const struct session *s = &sessions[i];
		fprintf(f, "%s\n {\"user\": \"u%05u\", \"next\": %" PRIu64 ", \"accepted\": [", i ? "," : "", s->id,
			s->seq + (uint64_t)s->in_flight);
		for (size_t k = 0; k < s->naccepted; k++)
			fprintf(f, "%s[%" PRIu64 ", %" PRIu64 "]", k ? ", " : "", s->accepted[k].start, s->accepted[k].end);
		fputs("], \"uncertain\": [", f);
		for (size_t k = 0; k < s->nuncertain; k++)
			fprintf(f, "%s%" PRIu64, k ? ", " : "", s->uncertain[k]);
		/* A message out when the run stopped may still arrive. */
		if (s->in_flight)
			fprintf(f, "%s%" PRIu64, s->nuncertain ? ", " : "", s->seq);
		fputs("]}", f);
	}
	fputs("\n]}\n", f);
	if (fclose(f) || rename(tmp, g->ledger_path))
		return -1;
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: " NAME " --ports LIST --cpus LIST [--sessions N] [--messages-per-connection N]\n"
		"                         [--domain D] [--timeout-ms MS] [--ledger PATH]\n"
		"                         [--first-session N] [options]\n"
		"  --sessions N       concurrent SMTP sessions, spread over ports and threads (default 96)\n"
		"  --messages-per-connection N  messages before QUIT and a new connection (default 10)\n"
		"  --domain D         the recipients' domain: session i mails u<i>@D (default mosbench.test)\n"
		"  --timeout-ms MS    a reply not come by then: the session starts a new connection\n"
		"                     (default 10000)\n"
		"  --ledger PATH      at the end, per session: the messages accepted and those of unknown fate\n"
		"  --first-session N  the first session's number (default 0): generators on several hosts mail\n"
		"                     disjoint users\n"
		LOAD_RUN_USAGE);
}

static const struct option options[] = {
	{ "sessions", required_argument, NULL, 's' },
	{ "messages-per-connection", required_argument, NULL, 'm' },
	{ "domain", required_argument, NULL, 'D' },
	{ "timeout-ms", required_argument, NULL, 't' },
	{ "ledger", required_argument, NULL, 'L' },
	{ "first-session", required_argument, NULL, 'f' },
	{ 0 },
};

static int smtp_option(struct load_run *r, int opt, const char *arg)
{
	struct smtpload *g = r->priv;
	switch (opt) {
	case 's': g->nsessions = (unsigned)load_parse_number(NAME, "sessions", arg, 1, MAX_SESSIONS); break;
	case 'm':
		g->per_conn = (unsigned)load_parse_number(NAME, "messages-per-connection", arg, 1, 1000000);
		break;
	case 'D': g->domain = arg; break;
	case 't': g->timeout_ns = (uint64_t)load_parse_number(NAME, "timeout-ms", arg, 1, 600000) * 1000000ull; break;
	case 'L': g->ledger_path = arg; break;
	case 'f':
		g->first_session = (unsigned)load_parse_number(NAME, "first-session", arg, 0, MAX_SESSIONS - 1);
		break;
	default: return -1;
	}
	return 0;
}

static int smtp_prepare(struct load_run *r)
{
	const struct smtpload *g = r->priv;
	for (unsigned i = 0; i < r->nthreads; i++)
		hist_init(&((struct smtp_thread *)r->threads[i].priv)->connection);
	if (g->first_session + g->nsessions > MAX_SESSIONS) {
		fprintf(stderr, NAME ": sessions %u..%u: the last is past %u\n", g->first_session,
			g->first_session + g->nsessions - 1, MAX_SESSIONS - 1);
		return 2;
	}
	r->nitems = g->nsessions;
	return 0;
}

/* Session i mails user first + i, through port i mod ports, from thread i mod threads. */
static void init_session(struct load_run *r, void *item, unsigned i, uint16_t port)
{
	struct session *s = item;
	const struct smtpload *g = r->priv;
	s->fd = -1;
	s->id = g->first_session + i;
	s->port = port;
}

static int smtp_finish(struct load_run *r, int status)
{
	const struct smtpload *g = r->priv;
	if (g->ledger_path && write_ledger(g, r->items)) {
		fprintf(stderr, NAME ": ledger %s: %s\n", g->ledger_path, strerror(errno));
		status = 1;
	}
	return status;
}

static void free_session(void *item)
{
	struct session *s = item;
	if (s->fd >= 0)
		close(s->fd);
	free(s->accepted);
	free(s->uncertain);
}

int main(int argc, char **argv)
{
	struct smtpload g = { .nsessions = 96, .per_conn = 10, .domain = "mosbench.test",
			      .timeout_ns = 10000000000ull };
	struct load_run r = {
		.name = NAME, .priv = &g,
		.options = options, .option = smtp_option, .usage = usage,
		.thread_priv_size = sizeof(struct smtp_thread), .prepare = smtp_prepare,
		.item_size = sizeof(struct session), .init_item = init_session, .free_item = free_session,
		.thread_fn = smtp_thread, .describe = describe, .finish = smtp_finish,
		.issue = smtp_issue, .per_issue = 1,
	};
	return load_main(argc, argv, &r);
}
