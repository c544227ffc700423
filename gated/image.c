/*
 * image.c: the size an image claims, checked before it is released.  A
 * PNG of 65535 x 65535 pixels is 200 bytes on disk and 16 GiB in the
 * memory of whoever opens it -- the agent's tool, the user's viewer, a
 * thumbnailer; a GIF can stack thousands of frames.  gated releases
 * images whose dimensions are within the policy's caps, read from the
 * headers the way a decoder reads them, by the decoders' own libraries:
 * libpng (IHDR, with libpng's checks of it), libjpeg (the frame header,
 * found by walking the markers as a decoder does), giflib (the logical
 * screen and every frame's descriptor, without decoding a pixel).  An
 * image a library cannot read up to its dimensions is not released
 * either: gated cannot say what it would cost.
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>
#include <jpeglib.h>
#include <gif_lib.h>

#include "util.h"
#include "gated/gated.h"

/* What libpng may allocate for one ancillary chunk before IDAT. */
#define IMAGE_PNG_CHUNK_MAX	(1024 * 1024)

struct image_src {
	const uint8_t	*buf;
	size_t		 len;
	size_t		 off;
	char		 msg[200];
};

/* ---- PNG ---- */

static void
image_png_read(png_structp png, png_bytep out, size_t n)
{
	struct image_src	*s = png_get_io_ptr(png);

	if (n > s->len - s->off)
		png_error(png, "the file ends inside a chunk");
	memcpy(out, s->buf + s->off, n);
	s->off += n;
}

static void
image_png_error(png_structp png, png_const_charp msg)
{
	struct image_src	*s = png_get_error_ptr(png);

	snprintf(s->msg, sizeof(s->msg), "%s", msg);
	png_longjmp(png, 1);
}

static void
image_png_warning(png_structp png, png_const_charp msg)
{
	(void)png;
	(void)msg;
}

static int
image_png(struct image_src *s, uint32_t *w, uint32_t *h)
{
	png_structp	png;
	png_infop	info = NULL;

	png = png_create_read_struct(PNG_LIBPNG_VER_STRING, s,
	    image_png_error, image_png_warning);
	if (png == NULL || (info = png_create_info_struct(png)) == NULL) {
		snprintf(s->msg, sizeof(s->msg), "libpng: out of memory");
		png_destroy_read_struct(&png, NULL, NULL);
		return -1;
	}
	if (setjmp(png_jmpbuf(png))) {
		png_destroy_read_struct(&png, &info, NULL);
		return -1;
	}
	png_set_read_fn(png, s, image_png_read);
	/* The caps are ours to apply; libpng only checks the format's. */
	png_set_user_limits(png, 0x7fffffff, 0x7fffffff);
	png_set_chunk_malloc_max(png, IMAGE_PNG_CHUNK_MAX);
	png_read_info(png, info);
	*w = png_get_image_width(png, info);
	*h = png_get_image_height(png, info);
	png_destroy_read_struct(&png, &info, NULL);
	return 0;
}

/* ---- JPEG ---- */

struct image_jerr {
	struct jpeg_error_mgr	 pub;
	jmp_buf			 jb;
	struct image_src	*s;
};

static void
image_jpeg_exit(j_common_ptr c)
{
	struct image_jerr	*e = (struct image_jerr *)c->err;
	char			 msg[JMSG_LENGTH_MAX];

	(*c->err->format_message)(c, msg);
	snprintf(e->s->msg, sizeof(e->s->msg), "%s", msg);
	longjmp(e->jb, 1);
}

static void
image_jpeg_quiet(j_common_ptr c)
{
	(void)c;
}

static int
image_jpeg(struct image_src *s, uint32_t *w, uint32_t *h)
{
	struct jpeg_decompress_struct	 ci;
	struct image_jerr		 je;

	memset(&ci, 0, sizeof(ci));
	ci.err = jpeg_std_error(&je.pub);
	je.pub.error_exit = image_jpeg_exit;
	je.pub.output_message = image_jpeg_quiet;
	je.s = s;
	if (setjmp(je.jb)) {
		jpeg_destroy_decompress(&ci);
		return -1;
	}
	jpeg_create_decompress(&ci);
	jpeg_mem_src(&ci, s->buf, (unsigned long)s->len);
	if (jpeg_read_header(&ci, TRUE) != JPEG_HEADER_OK) {
		snprintf(s->msg, sizeof(s->msg), "no image in the file");
		jpeg_destroy_decompress(&ci);
		return -1;
	}
	*w = ci.image_width;
	*h = ci.image_height;
	jpeg_destroy_decompress(&ci);
	return 0;
}

/* ---- GIF ---- */

static int
image_gif_read(GifFileType *g, GifByteType *out, int n)
{
	struct image_src	*s = g->UserData;
	size_t			 k = (size_t)n;

	if (n < 0)
		return 0;
	if (k > s->len - s->off)
		k = s->len - s->off;
	memcpy(out, s->buf + s->off, k);
	s->off += k;
	return (int)k;
}

/* The screen in *w x *h; every frame's size checked as it comes. */
static int
image_gif(struct image_src *s, uint32_t *w, uint32_t *h, uint32_t max_side,
    uint64_t *pixels)
{
	GifFileType	*g;
	GifRecordType	 rt;
	GifByteType	*blk;
	int		 err = 0, code, ext, rc = -1;
	uint32_t	 fw, fh;

	if ((g = DGifOpen(s, image_gif_read, &err)) == NULL) {
		snprintf(s->msg, sizeof(s->msg), "%s", GifErrorString(err));
		return -1;
	}
	*w = (uint32_t)g->SWidth;
	*h = (uint32_t)g->SHeight;
	*pixels = 0;
	for (;;) {
		if (DGifGetRecordType(g, &rt) == GIF_ERROR)
			goto bad;
		if (rt == TERMINATE_RECORD_TYPE)
			break;
		if (rt == EXTENSION_RECORD_TYPE) {
			if (DGifGetExtension(g, &ext, &blk) == GIF_ERROR)
				goto bad;
			while (blk != NULL)
				if (DGifGetExtensionNext(g, &blk) == GIF_ERROR)
					goto bad;
			continue;
		}
		if (rt != IMAGE_DESC_RECORD_TYPE)
			continue;
		if (DGifGetImageDesc(g) == GIF_ERROR)
			goto bad;
		fw = (uint32_t)g->Image.Width;
		fh = (uint32_t)g->Image.Height;
		if (fw > max_side || fh > max_side) {
			snprintf(s->msg, sizeof(s->msg), "a frame of %u x %u",
			    fw, fh);
			rc = 1;
			goto out;
		}
		*pixels += (uint64_t)fw * fh;
		/* Skip the pixels without decoding them. */
		if (DGifGetCode(g, &code, &blk) == GIF_ERROR)
			goto bad;
		while (blk != NULL)
			if (DGifGetCodeNext(g, &blk) == GIF_ERROR)
				goto bad;
	}
	rc = 0;
	goto out;
bad:
	snprintf(s->msg, sizeof(s->msg), "%s", GifErrorString(g->Error));
out:
	DGifCloseFile(g, &err);
	return rc;
}

const char *
image_check(const char *type, const uint8_t *buf, size_t len,
    uint32_t max_side, uint64_t max_pixels, char *why, size_t whylen)
{
	struct image_src	 s;
	uint32_t		 w = 0, h = 0;
	uint64_t		 frames = 0;
	int			 r;

	memset(&s, 0, sizeof(s));
	s.buf = buf;
	s.len = len;
	if (strcmp(type, "image/png") == 0)
		r = image_png(&s, &w, &h);
	else if (strcmp(type, "image/jpeg") == 0)
		r = image_jpeg(&s, &w, &h);
	else if (strcmp(type, "image/gif") == 0)
		r = image_gif(&s, &w, &h, max_side, &frames);
	else
		return NULL;
	if (r == 1) {
		snprintf(why, whylen, "%s: %s, more than %u pixels a side",
		    type, s.msg, max_side);
		return DROP_IMAGE_LARGE;
	}
	if (r == -1) {
		snprintf(why, whylen, "%s: %s", type, s.msg);
		return DROP_IMAGE_BAD;
	}
	if (w == 0 || h == 0) {
		snprintf(why, whylen, "%s: %u x %u pixels", type, w, h);
		return DROP_IMAGE_BAD;
	}
	if (w > max_side || h > max_side) {
		snprintf(why, whylen, "%s: %u x %u pixels, more than %u a "
		    "side", type, w, h, max_side);
		return DROP_IMAGE_LARGE;
	}
	if ((uint64_t)w * h > max_pixels || frames > max_pixels) {
		snprintf(why, whylen, "%s: %u x %u pixels%s, more than %llu",
		    type, w, h, frames > max_pixels ? " in its frames" : "",
		    (unsigned long long)max_pixels);
		return DROP_IMAGE_LARGE;
	}
	return NULL;
}
