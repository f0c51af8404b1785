/* dup/close: descriptor table allocation. Threads share one table (and its lock); processes do not. */
#include "../micro.h"
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

static void run(struct micro_task *t)
{
	int fd = open("/dev/null", O_RDONLY);
	MICRO_FAIL_ON(t, fd < 0, "open /dev/null");
	for (;;) {
		int d = dup(fd);
		MICRO_FAIL_ON(t, d < 0, "dup");
		close(d);
		micro_count(t);
	}
}

MICRO_TEST(dup1, .description = "dup/close of a descriptor (descriptor table)", .run = run);
