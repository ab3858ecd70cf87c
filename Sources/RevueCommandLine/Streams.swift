#if canImport(Glibc)
    import Glibc
#endif

/// Standard output and standard error for the tools, written with `write(2)` directly: each call
/// reaches the pipe at once (no stdio buffer to flush, so a line of machine-readable output is seen
/// by the reader when it is written), and nothing needs Foundation.
/// Thread rule: any thread; one call's bytes go out in one `write` unless the pipe is full, and
/// calls from several threads may interleave only at those boundaries. Cost: one system call per
/// call (more only for partial writes).
package enum StandardStream {
    /// Writes `text` to standard output.
    package static func output(_ text: String) { write(text, to: STDOUT_FILENO) }

    /// Writes `text` to standard error.
    package static func error(_ text: String) { write(text, to: STDERR_FILENO) }

    private static func write(_ text: String, to fd: Int32) {
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let n = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if n > 0 {
                    offset += n
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    return  // a closed pipe: nothing more can be said
                }
            }
        }
    }
}
