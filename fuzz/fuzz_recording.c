/* libFuzzer target for the recording parser (recording_parse): any bytes
 * must either parse or be refused with a message, never crash, leak or
 * read out of bounds. The input is not NUL-terminated, on purpose. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "record/recording.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct recording *rec = NULL;
	char err[256];
	int rc = recording_parse((const char *)data, size, "fuzz.csv", &rec, err, sizeof err);
	/* A refusal always says where; a success always hands back rows that
	 * respect the declared bounds. */
	if (rc != 0) {
		if (rec || strncmp(err, "fuzz.csv:", 9) != 0)
			__builtin_trap();
		return 0;
	}
	if (!rec || rec->ngpus < 0 || rec->ngpus > 64 || rec->nrows > RECORDING_MAX_ROWS)
		__builtin_trap();
	for (size_t i = 0; i < rec->nrows; i++)
		if (rec->rows[i].gpu < 0 || rec->rows[i].gpu >= rec->ngpus)
			__builtin_trap();
	recording_free(rec);
	return 0;
}
