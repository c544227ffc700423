/*
 * utf8.c: UTF-8 decoding and the list of hidden code points (utf8.h).
 * What upholds the invariant of both users -- text from a sandbox cannot
 * say something to a model that a person reading it does not see -- is
 * that a character is either shown as what it is or removed (gated) or
 * spelled out (approvald), never passed through invisibly; this list is
 * what "invisible" means everywhere.
 */
#include "utf8.h"

size_t
utf8_decode(const uint8_t *s, size_t n, uint32_t *cp)
{
	uint32_t	c, min;
	size_t		len, i;

	if (n == 0)
		return 0;
	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		c = s[0] & 0x1f;
		min = 0x80;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		c = s[0] & 0x0f;
		min = 0x800;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		c = s[0] & 0x07;
		min = 0x10000;
	} else
		return 0;	/* continuation, 0xc0/0xc1 overlong, 0xf5.. */
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

int
utf8_hidden(uint32_t cp)
{
	return (cp >= 0x80 && cp <= 0x9f) || cp == 0xad ||
	    cp == 0x061c || cp == 0x115f || cp == 0x1160 || cp == 0x180e ||
	    (cp >= 0x200b && cp <= 0x200f) ||
	    (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x206f) ||
	    cp == 0x3164 || cp == 0xfeff || cp == 0xffa0 ||
	    (cp >= 0xfff9 && cp <= 0xfffb) ||
	    (cp >= 0xe0000 && cp <= 0xe007f) ||
	    (cp >= 0xe0100 && cp <= 0xe01ef);
}
