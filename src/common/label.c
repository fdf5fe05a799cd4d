/* The label type's one comparison; see label.h. */
#include "common/label.h"

#include <string.h>

int label_cmp_name(const void *a, const void *b)
{
	const struct label *x = a, *y = b;
	return strcmp(x->name, y->name);
}
