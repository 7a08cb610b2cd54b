/*
 * Stand-in for miniaudio.h, which the Ollama Go module zip does not carry
 * (module zips drop vendor/ directories). It declares only the decoder API
 * that llama.cpp's tools/mtmd/mtmd-helper.cpp calls, and every call fails:
 * the proxy's test tier never sends audio, so a build that rejects audio
 * input is all it needs. scripts/build-ollama.sh puts this directory on
 * CGO_CPPFLAGS.
 */
#ifndef CHAINPROXY_MINIAUDIO_STANDIN_H
#define CHAINPROXY_MINIAUDIO_STANDIN_H

#include <stddef.h>
#include <stdint.h>

#ifndef MA_API
#define MA_API static
#endif

typedef int ma_result;
typedef uint32_t ma_uint32;
typedef uint64_t ma_uint64;

#define MA_SUCCESS 0
#define MA_ERROR (-1)

typedef enum { ma_format_unknown = 0, ma_format_f32 = 5 } ma_format;

typedef struct {
    ma_format format;
    ma_uint32 channels;
    ma_uint32 sampleRate;
} ma_decoder_config;

typedef struct {
    int unused;
} ma_decoder;

MA_API inline ma_decoder_config ma_decoder_config_init(ma_format format, ma_uint32 channels, ma_uint32 sampleRate) {
    ma_decoder_config c;
    c.format = format;
    c.channels = channels;
    c.sampleRate = sampleRate;
    return c;
}

MA_API inline ma_result ma_decoder_init_memory(const void *data, size_t size, const ma_decoder_config *config, ma_decoder *decoder) {
    (void)data; (void)size; (void)config;
    if (decoder) decoder->unused = 0;
    return MA_ERROR;
}

MA_API inline ma_result ma_decoder_get_length_in_pcm_frames(ma_decoder *decoder, ma_uint64 *length) {
    (void)decoder;
    if (length) *length = 0;
    return MA_ERROR;
}

MA_API inline ma_result ma_decoder_read_pcm_frames(ma_decoder *decoder, void *frames, ma_uint64 count, ma_uint64 *read) {
    (void)decoder; (void)frames; (void)count;
    if (read) *read = 0;
    return MA_ERROR;
}

MA_API inline ma_result ma_decoder_uninit(ma_decoder *decoder) {
    (void)decoder;
    return MA_SUCCESS;
}

#endif
