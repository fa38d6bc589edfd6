// placeholder
int test_dmabuf(void);
int test_dmabuf(void) { return 0; }
