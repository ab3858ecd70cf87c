#if canImport(Glibc)
    import Glibc
#endif

/// Text helpers the engine and its tools share, written on the standard library so that no module
/// needs Foundation for them.
extension StringProtocol {
    /// The text without leading and trailing whitespace (spaces, tabs, line breaks), as a new
    /// `String`. Cost: one scan from each end and one copy of what remains.
    package var trimmingWhitespace: String {
        guard let first = firstIndex(where: { !$0.isWhitespace }),
            let last = lastIndex(where: { !$0.isWhitespace })
        else { return "" }
        return String(self[first...last])
    }

    /// The text padded on the right with spaces to `width` characters (unchanged when it is as
    /// long already), for aligned columns. Cost: one copy.
    package func padded(to width: Int) -> String {
        String(self) + String(repeating: " ", count: Swift.max(0, width - count))
    }
}

extension Double {
    /// The number in fixed-point notation with `digits` decimals (C's `%.Nf`, rounding half to
    /// even as printf does), for reports and progress lines. Cost: one `snprintf` into a stack buffer.
    package func fixed(_ digits: Int) -> String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 350) { buffer in
            _ = withVaList([self]) { vsnprintf(buffer.baseAddress!, buffer.count, "%.\(digits)f", $0) }
            return String(cString: buffer.baseAddress!)
        }
    }
}
