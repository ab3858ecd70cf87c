// libFuzzer target for FuzzEntries.dtls (see docs/robustness.md). No main.swift: with
// --sanitize=fuzzer libFuzzer supplies main; a plain build links an executable that does nothing.
import FuzzEntries

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FuzzEntries.dtls(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
