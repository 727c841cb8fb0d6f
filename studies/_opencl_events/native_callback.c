/* Native event callback for the opencl-events study.
 *
 * clSetEventCallback's signature is void (cl_event, cl_int, void *user_data). This one
 * only adds 1 to the counter behind user_data: no GIL, no allocation, no thread of its
 * own, so what it costs is what the OpenCL runtime's callback machinery costs (the seed's
 * C++ callbacks were as thin). Declared without CL headers so any C compiler builds it.
 */
void count_event(void *event, int status, void *user_data)
{
    (void)event;
    (void)status;
    __atomic_fetch_add((long *)user_data, 1L, __ATOMIC_RELAXED);
}
