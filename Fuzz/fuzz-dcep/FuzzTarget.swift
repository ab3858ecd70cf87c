// libFuzzer target for FuzzEntries.dcep (see docs/robustness.md). No main.swift: with
// --sanitize=fuzzer libFuzzer supplies main; a plain build links an executable that does nothing.
import FuzzEntries

/// libFuzzer's entry point: runs one input through the target and returns 0 (the input may join the corpus).
/// Thread rule: libFuzzer calls it with one input at a time. Cost: that of the target on `size` bytes.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzEntries.dcep(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
