/* A label: one name and its value, as Prometheus's model has it. The one
 * label type of gpulse: the store (tsdb), the PromQL engine and its
 * storages, alert notices and remote write all hand labels over as
 * arrays of it, so a set passes from one to another without a copy.
 *
 * The strings are borrowed: whoever hands a label set out says who owns
 * the bytes and for how long (each declaration that does says so). */
#ifndef GPULSE_LABEL_H
#define GPULSE_LABEL_H

struct label {
	const char *name;
	const char *value;
};

/* qsort's comparison of two struct label by name (strcmp's order, the
 * order Prometheus sorts a label set in). */
int label_cmp_name(const void *a, const void *b);

#endif
