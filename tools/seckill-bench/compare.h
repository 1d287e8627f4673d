/* compare.h: seckill-bench --mode compare: the three stock-deduction
 * strategies commonly written by hand (pessimistic lock, optimistic DECR +
 * compensation, the Lua script one call per purchase) beside ours (the Lua script with
 * coalescing), engine level (no HTTP), on one Redis, in one run. Every
 * strategy gets a fresh campaign and the same buyers. */
#ifndef SECKILL_BENCH_COMPARE_H
#define SECKILL_BENCH_COMPARE_H

/* Runs compare mode with seckill-bench's command line (argv contains
 * --mode compare). Returns the process exit status: 0 when the Lua
 * strategies oversold nothing, gave nobody more than the limit and had no
 * errors, 1 otherwise, 2 on usage or setup errors. */
int cmp_main(int argc, char **argv);

/* True when argv asks for --mode compare. */
int cmp_wanted(int argc, char **argv);

#endif
