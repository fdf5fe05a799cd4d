/* Sparklines; see spark.h. */
#include "common/spark.h"

#include <math.h>
#include <string.h>

void spark_draw(const double *v, size_t n, double lo, double hi, bool utf8, size_t width, char *out,
		size_t len)
{
	static const char *const blocks[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
	static const char ascii[] = "_.-=#";
	const int levels = utf8 ? 8 : 5;
	if (len == 0)
		return;
	out[0] = '\0';
	if (width > SPARK_MAX_WIDTH)
		width = SPARK_MAX_WIDTH;
	if (n < width)
		width = n;
	size_t o = 0;
	for (size_t c = 0; c < width; c++) {
		size_t from = c * n / width, to = (c + 1) * n / width;
		double sum = 0;
		size_t cnt = 0;
		for (size_t i = from; i < to; i++)
			if (isfinite(v[i])) {
				sum += v[i];
				cnt++;
			}
		const char *ch;
		char one[2] = {' ', '\0'};
		if (cnt == 0) {
			ch = one;
		} else {
			int level;
			if (hi > lo) {
				double r = (sum / (double)cnt - lo) / (hi - lo);
				level = (int)lround(r * (levels - 1));
			} else {
				level = (levels - 1) / 2; /* flat: the middle */
			}
			level = level < 0 ? 0 : level >= levels ? levels - 1 : level;
			if (utf8) {
				ch = blocks[level];
			} else {
				one[0] = ascii[level];
				ch = one;
			}
		}
		size_t l = strlen(ch);
		if (o + l + 1 > len)
			break;
		memcpy(out + o, ch, l);
		o += l;
		out[o] = '\0';
	}
}
