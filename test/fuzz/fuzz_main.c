/* Where clang's libFuzzer is absent: replays files (or every file of the
 * directories) given as arguments through LLVMFuzzerTestOneInput, so the
 * corpus still runs in make check. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz: cannot open %s\n", path);
        return -1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, got;
    do {
        if (len == cap) {
            cap = cap ? 2 * cap : 4096;
            uint8_t *b = realloc(buf, cap);
            if (!b) {
                free(buf);
                fclose(f);
                return -1;
            }
            buf = b;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    int inputs = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "fuzz: no such file %s\n", argv[i]);
            bad++;
        } else if (S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            for (struct dirent *e; d && (e = readdir(d));) {
                if (e->d_name[0] == '.') continue;
                char path[4096];
                snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
                bad += run_file(path) != 0;
                inputs++;
            }
            if (d) closedir(d);
        } else {
            bad += run_file(argv[i]) != 0;
            inputs++;
        }
    }
    printf("fuzz: %d inputs replayed\n", inputs);
    return bad || inputs == 0 ? 1 : 0;
}
