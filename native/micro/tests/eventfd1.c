/* eventfd write then read: the smallest wakeup-capable kernel object, uncontended. */
#include "../micro.h"
#include <errno.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

static void run(struct micro_task *t)
{
	int fd = eventfd(0, 0);
	uint64_t v = 1;
	MICRO_FAIL_ON(t, fd < 0, "eventfd");
	for (;;) {
		MICRO_FAIL_ON(t, write(fd, &v, sizeof(v)) != sizeof(v), "eventfd write");
		MICRO_FAIL_ON(t, read(fd, &v, sizeof(v)) != sizeof(v), "eventfd read");
		micro_count(t);
	}
}

MICRO_TEST(eventfd1, .description = "eventfd write and read, one per task", .run = run);
