/*
 * utf8.h: the one UTF-8 decoder and the one list of invisible code points
 * that every daemon showing sandbox-written text to a person or a model
 * shares (approvald's quoting, gated's text release).  Both must agree on
 * what is well-formed and what is hidden, so there is one definition.
 */
#ifndef SBX_UTF8_H
#define SBX_UTF8_H

#include <stddef.h>
#include <stdint.h>

/*
 * The length (1..4) of the well-formed UTF-8 character at s, at most n
 * bytes long, with its code point in *cp; 0 when it is not one: a stray
 * continuation byte, an overlong form, a surrogate, a value past
 * U+10FFFF, or a sequence cut short by n.
 */
size_t	utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);
/*
 * 1 for a code point a reader does not see but that changes what the text
 * says or how it is shown: C1 controls, soft hyphen, the bidirectional
 * marks, embeddings, overrides and isolates (U+061C, U+200E/F,
 * U+202A..E, U+2066..9), zero-width characters (U+200B..D, U+2060..4,
 * U+FEFF), the line and paragraph separators (U+2028/9), interlinear
 * annotation (U+FFF9..B), the Mongolian vowel separator, the Unicode tag characters (U+E0000..7F,
 * invisible ASCII), the variation selectors supplement (U+E0100..EF,
 * a byte each to whoever decodes them) and the Hangul fillers that render
 * as blanks.
 */
int	utf8_hidden(uint32_t cp);

#endif
