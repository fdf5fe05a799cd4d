/* The field table of fields.h, expanded. */
#include "collect/fields.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

const struct field_info field_table[FIELD_COUNT] = {
#define FIELD_ROW(id, col, sc, met, lab, typ, tr, hlp) \
	[F_##id] = {.column = col, .scale = sc, .metric = met, .labels = lab, \
		    .type = METRIC_##typ, .tier = TIER_##tr, .help = hlp},
	GPULSE_FIELDS(FIELD_ROW)
#undef FIELD_ROW
};

const struct clock_reason_info clock_reason_table[] = {
#define REASON_ROW(b, l, d) {.bit = b, .label = l, .description = d},
	GPULSE_CLOCK_REASONS(REASON_ROW)
#undef REASON_ROW
};
const int clock_reason_count = sizeof clock_reason_table / sizeof clock_reason_table[0];

uint64_t fields_of_tier(enum tier tier)
{
	uint64_t mask = 0;
	for (int f = 0; f < FIELD_COUNT; f++)
		if (field_table[f].tier == tier)
			mask |= FIELD_BIT(f);
	return mask;
}

int field_by_column(const char *column)
{
	for (int f = 0; f < FIELD_COUNT; f++)
		if (field_table[f].column && strcmp(field_table[f].column, column) == 0)
			return f;
	return -1;
}

const char *tier_name(enum tier tier)
{
	static const char *const names[TIER_COUNT] = {"fast", "normal", "slow"};
	return (unsigned)tier < TIER_COUNT ? names[tier] : "unknown";
}

static const char *const field_ids[FIELD_COUNT] = {
#define FIELD_ID_NAME(id, col, sc, met, lab, typ, tr, hlp) [F_##id] = #id,
	GPULSE_FIELDS(FIELD_ID_NAME)
#undef FIELD_ID_NAME
};
static char field_keys[FIELD_COUNT][32];
static pthread_once_t field_keys_once = PTHREAD_ONCE_INIT;

static void field_keys_fill(void)
{
	for (int f = 0; f < FIELD_COUNT; f++) {
		const char *id = field_ids[f];
		size_t i;
		for (i = 0; id[i] && i + 1 < sizeof field_keys[f]; i++)
			field_keys[f][i] = (char)((id[i] >= 'A' && id[i] <= 'Z') ? id[i] + 32 : id[i]);
		field_keys[f][i] = '\0';
	}
}

const char *field_key(enum field_id f)
{
	if ((unsigned)f >= FIELD_COUNT)
		return "unknown";
	pthread_once(&field_keys_once, field_keys_fill);
	return field_keys[f];
}

int field_by_key(const char *key)
{
	for (int f = 0; f < FIELD_COUNT; f++)
		if (strcmp(field_key((enum field_id)f), key) == 0)
			return f;
	return -1;
}

/* For scales below 1 whose inverse is a whole number (0.01, 1e-3), the
 * divisor; 0 otherwise. */
static double field_divisor(enum field_id f)
{
	double sc = field_table[f].scale;
	if (sc >= 1 || sc <= 0)
		return 0;
	double inv = round(1 / sc);
	return fabs(inv * sc - 1) < 1e-12 ? inv : 0;
}

double field_to_base(enum field_id f, double unit_value)
{
	double d = field_divisor(f);
	return d ? unit_value / d : unit_value * field_table[f].scale;
}

double field_from_base(enum field_id f, double base_value)
{
	double d = field_divisor(f);
	return d ? base_value * d : base_value / field_table[f].scale;
}
