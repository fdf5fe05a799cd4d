/* Text for the status table in status.h. */
#include "common/status.h"

static const char *const status_text[] = {
#define GPULSE_STATUS_TEXT(name, text) text,
	GPULSE_STATUS_TABLE(GPULSE_STATUS_TEXT)
#undef GPULSE_STATUS_TEXT
};

static const char *const status_name[] = {
#define GPULSE_STATUS_NAME(name, text) #name,
	GPULSE_STATUS_TABLE(GPULSE_STATUS_NAME)
#undef GPULSE_STATUS_NAME
};

const char *gpulse_strerror(int status)
{
	if (status < 0 || status >= GPULSE_STATUS_COUNT)
		return "unknown status";
	return status_text[status];
}

const char *gpulse_err_name(int status)
{
	if (status < 0 || status >= GPULSE_STATUS_COUNT)
		return "EUNKNOWN";
	return status_name[status];
}
