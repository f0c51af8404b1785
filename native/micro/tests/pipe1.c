/* pipe/close: two files, an inode on pipefs and descriptor allocation per iteration. */
#include "../micro.h"
#include <errno.h>
#include <unistd.h>

static void run(struct micro_task *t)
{
	for (;;) {
		int p[2];
		MICRO_FAIL_ON(t, pipe(p), "pipe");
		close(p[0]);
		close(p[1]);
		micro_count(t);
	}
}

MICRO_TEST(pipe1, .description = "pipe() and close both ends (pipefs inode and file allocation)",
	   .run = run);
