/* Sparklines: a row of numbers drawn as one line of block characters
 * ("▁▂▃▄▅▆▇█"), or of "_.-=#" where the terminal is not UTF-8. Shared by
 * `gpulse query --range` and `gpulse report`. */
#ifndef GPULSE_SPARK_H
#define GPULSE_SPARK_H

#include <stdbool.h>
#include <stddef.h>

#define SPARK_MAX_WIDTH 256 /* characters one sparkline may have */

/* Draw v[0..n) averaged into at most `width` buckets (width <=
 * SPARK_MAX_WIDTH), each bucket's mean scaled to lo..hi and drawn as one
 * character; a bucket with no finite value is a space, and a flat line
 * (hi <= lo) is drawn at the middle level. The text, NUL-terminated,
 * goes to out (at most len bytes: 4 per character and 1 suffice; what
 * does not fit is cut at a character boundary). */
void spark_draw(const double *v, size_t n, double lo, double hi, bool utf8, size_t width, char *out,
		size_t len);

#endif
