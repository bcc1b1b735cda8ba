/* SPDX-License-Identifier: BSD-3-Clause */
/* jpegs.c - see jpegs.h. */
#include "jpegs.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_config.h"
#include "base/util.h"

#ifdef HAVE_JPEG
#include <jerror.h>
#include <jpeglib.h>
#endif

void jpeg_scaled_size(int w, int h, int denom, int *out_w, int *out_h) {
    *out_w = (w + denom - 1) / denom;
    *out_h = (h + denom - 1) / denom;
}

#ifndef HAVE_JPEG

int jpegs_available(void) { return 0; }

static int no_jpeg(char *err, size_t errlen) {
    return errf(err, errlen, "this build has no libjpeg (libjpeg-turbo): install its -dev package and configure again");
}

int jpeg_encode_rgb(const uint8_t *rgb, int w, int h, int quality, uint8_t **out, size_t *len,
                    char *err, size_t errlen) {
    *out = NULL;
    *len = 0;
    return no_jpeg(err, errlen);
}

int jpeg_decode_scaled(const uint8_t *data, size_t len, int denom, int want_w, int want_h, ImageRGB *out,
                       char *err, size_t errlen) {
    out->w = out->h = 0;
    out->rgb = NULL;
    return no_jpeg(err, errlen);
}

int jpeg_decode_scaled_into(const uint8_t *data, size_t len, int denom, int want_w, int want_h, uint8_t *dst,
                            size_t cap, int *w, int *h, char *err, size_t errlen) {
    return no_jpeg(err, errlen);
}

#else

int jpegs_available(void) { return 1; }

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX + 64];
} JErr;

static void jerr_exit(j_common_ptr c) {
    JErr *e = (JErr *)c->err;
    char m[JMSG_LENGTH_MAX];
    c->err->format_message(c, m);
    if (!e->msg[0]) snprintf(e->msg, sizeof e->msg, "not a readable JPEG (%s)", m);
    longjmp(e->jb, 1);
}

/* Every warning is an error: libjpeg warns on corrupt data and on data that ends before the
 * image (then pads it with grey), and a stored JPEG has no excuse for either. Trace messages
 * (level > 0) are ignored. */
static void jerr_message(j_common_ptr c, int level) {
    JErr *e = (JErr *)c->err;
    if (level >= 0) return;
    char m[JMSG_LENGTH_MAX];
    c->err->format_message(c, m);
    if (c->err->msg_code == JWRN_JPEG_EOF)
        snprintf(e->msg, sizeof e->msg, "a truncated JPEG (the data ends before the image does)");
    else
        snprintf(e->msg, sizeof e->msg, "a corrupt JPEG (%s)", m);
    longjmp(e->jb, 1);
}

static void jerr_init(JErr *e, struct jpeg_error_mgr **slot) {
    *slot = jpeg_std_error(&e->pub);
    e->pub.error_exit = jerr_exit;
    e->pub.emit_message = jerr_message;
    e->msg[0] = '\0';
}

/* The encoder's output: a buffer of ours that grows by doubling, so that it is freed the same
 * way whether the encoder finished or failed (jpeg_mem_dest's own buffer changes hands). */
typedef struct {
    struct jpeg_destination_mgr pub;
    uint8_t *buf;
    size_t cap;
} GrowDest;

static void grow_init(j_compress_ptr c) { (void)c; }

static boolean grow_empty(j_compress_ptr c) {
    GrowDest *d = (GrowDest *)c->dest;
    /* libjpeg calls this with the whole buffer full (free_in_buffer is ignored then). */
    size_t ncap = d->cap * 2;
    uint8_t *nb = realloc(d->buf, ncap);
    if (!nb) ERREXIT(c, JERR_OUT_OF_MEMORY);
    d->buf = nb;
    d->pub.next_output_byte = nb + d->cap;
    d->pub.free_in_buffer = ncap - d->cap;
    d->cap = ncap;
    return TRUE;
}

static void grow_term(j_compress_ptr c) { (void)c; }

int jpeg_encode_rgb(const uint8_t *rgb, int w, int h, int quality, uint8_t **out, size_t *len,
                    char *err, size_t errlen) {
    *out = NULL;
    *len = 0;
    if (w < 1 || h < 1 || w > JPEG_MAX_DIMENSION || h > JPEG_MAX_DIMENSION)
        return errf(err, errlen, "cannot encode an image of %dx%d pixels as JPEG (1 to %d a side)", w, h, (int)JPEG_MAX_DIMENSION);
    if (quality < 1 || quality > 100) return errf(err, errlen, "JPEG quality %d is outside [1, 100]", quality);
    struct jpeg_compress_struct c;
    JErr e;
    /* Room for most images at once: a quarter of the pixels' bytes and the headers. */
    GrowDest d = {.cap = (size_t)w * (size_t)h * 3 / 4 + 2048};
    d.buf = malloc(d.cap);
    if (!d.buf) return errf(err, errlen, "cannot allocate %zu bytes for a JPEG", d.cap);
    jerr_init(&e, &c.err);
    if (setjmp(e.jb)) {
        jpeg_destroy_compress(&c);
        free(d.buf);
        return errf(err, errlen, "%s", e.msg);
    }
    jpeg_create_compress(&c);
    d.pub.init_destination = grow_init;
    d.pub.empty_output_buffer = grow_empty;
    d.pub.term_destination = grow_term;
    d.pub.next_output_byte = d.buf;
    d.pub.free_in_buffer = d.cap;
    c.dest = &d.pub;
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, quality, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(rgb + (size_t)c.next_scanline * (size_t)w * 3);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    *len = d.cap - d.pub.free_in_buffer;
    jpeg_destroy_compress(&c);
    *out = d.buf;
    return 0;
}

/* The decoder's one body: into dst (cap bytes) when dst is given, else into a buffer it
 * allocates (*alloc). */
static int decode(const uint8_t *data, size_t len, int denom, int want_w, int want_h, uint8_t *dst,
                  size_t cap, uint8_t **alloc, int *w, int *h, char *err, size_t errlen) {
    *w = *h = 0;
    if (alloc) *alloc = NULL;
    if (denom != 1 && denom != 2 && denom != 4 && denom != 8)
        return errf(err, errlen, "JPEG scale 1/%d: only 1/1, 1/2, 1/4 and 1/8 are supported", denom);
    if (len < 4 || data[0] != 0xff || data[1] != 0xd8)
        return errf(err, errlen, "not a JPEG (%zu bytes that do not start with the SOI marker FF D8)", len);
    if (len > (size_t)0xffffffffu) return errf(err, errlen, "a JPEG of %zu bytes, more than 4 GiB", len);
    struct jpeg_decompress_struct c;
    JErr e;
    uint8_t *volatile buf = NULL;
    jerr_init(&e, &c.err);
    if (setjmp(e.jb)) {
        jpeg_destroy_decompress(&c);
        free(buf);
        return errf(err, errlen, "%s", e.msg);
    }
    jpeg_create_decompress(&c);
    jpeg_mem_src(&c, data, (unsigned long)len);
    jpeg_read_header(&c, TRUE);
    if (c.jpeg_color_space == JCS_CMYK || c.jpeg_color_space == JCS_YCCK) {
        jpeg_destroy_decompress(&c);
        return errf(err, errlen, "a CMYK JPEG (RGB or grey is expected)");
    }
    /* The header's size against the one recorded, before anything is decoded: at a reduced
     * DCT scale the output's size no longer tells a 32x48 image from a 29x45 one, so another
     * valid JPEG put in a sample's place would otherwise be cropped as if it were the one
     * recorded (and it sizes the buffer below). */
    if (want_w > 0 && ((long long)c.image_width != want_w || (long long)c.image_height != want_h)) {
        long long iw = c.image_width, ih = c.image_height;
        jpeg_destroy_decompress(&c);
        return errf(err, errlen, "the JPEG is %lldx%lld (height x width) but dataset 'sizes' says %dx%d (damaged file?)",
                    ih, iw, want_h, want_w);
    }
    if ((long long)c.image_width * c.image_height > IMAGE_MAX_PIXELS) {
        long long iw = c.image_width, ih = c.image_height;
        jpeg_destroy_decompress(&c);
        return errf(err, errlen, "a JPEG of %lldx%lld pixels, more than the %lld supported", iw, ih, IMAGE_MAX_PIXELS);
    }
    c.out_color_space = JCS_RGB;
    c.scale_num = 1;
    c.scale_denom = (unsigned)denom;
    jpeg_calc_output_dimensions(&c);
    const size_t ow = c.output_width, oh = c.output_height;
    if (c.output_components != 3) {
        jpeg_destroy_decompress(&c);
        return errf(err, errlen, "a JPEG of an unsupported colour space");
    }
    uint8_t *out = dst;
    if (dst) {
        if (ow * oh * 3 > cap) {
            jpeg_destroy_decompress(&c);
            return errf(err, errlen, "a JPEG of %zux%zu pixels at 1/%d, more than the %zu bytes given for it",
                        ow, oh, denom, cap);
        }
    } else {
        buf = out = malloc(ow * oh * 3);
        if (!out) {
            jpeg_destroy_decompress(&c);
            return errf(err, errlen, "cannot allocate %zu bytes for a %zux%zu JPEG", ow * oh * 3, ow, oh);
        }
    }
    jpeg_start_decompress(&c);
    while (c.output_scanline < c.output_height) {
        /* Up to 4 rows a call: libjpeg's output buffer is rec_outbuf_height rows (1 to 4). */
        JSAMPROW rows[4];
        for (int k = 0; k < 4; k++) {
            size_t y = c.output_scanline + (size_t)k < oh ? c.output_scanline + (size_t)k : oh - 1;
            rows[k] = out + y * ow * 3;
        }
        jpeg_read_scanlines(&c, rows, 4);
    }
    /* Reads up to the EOI marker: data corrupt after the last row is an error too. */
    jpeg_finish_decompress(&c);
    jpeg_destroy_decompress(&c);
    *w = (int)ow;
    *h = (int)oh;
    if (alloc) *alloc = out;
    return 0;
}

int jpeg_decode_scaled(const uint8_t *data, size_t len, int denom, int want_w, int want_h, ImageRGB *out,
                       char *err, size_t errlen) {
    out->w = out->h = 0;
    out->rgb = NULL;
    return decode(data, len, denom, want_w, want_h, NULL, 0, &out->rgb, &out->w, &out->h, err, errlen);
}

int jpeg_decode_scaled_into(const uint8_t *data, size_t len, int denom, int want_w, int want_h, uint8_t *dst,
                            size_t cap, int *w, int *h, char *err, size_t errlen) {
    CHECK(dst != NULL);
    return decode(data, len, denom, want_w, want_h, dst, cap, NULL, w, h, err, errlen);
}

#endif
