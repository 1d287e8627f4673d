/* args.h: strict numeric option parsing shared by seckill-bench's modes:
 * the whole string must be a number within range, else one clear line on
 * stderr and -1. */
#ifndef SECKILL_BENCH_ARGS_H
#define SECKILL_BENCH_ARGS_H

int parse_int_opt(const char *name, const char *v, long lo, long hi, int *out);
int parse_double_opt(const char *name, const char *v, double *out); /* 0 .. 1e7 */

#endif
