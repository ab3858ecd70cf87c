import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Counts, exactly, the heap allocations the calling thread makes while a closure runs.
///
/// How: for the duration of `count(_:)` it rewrites the GOT slots (`R_X86_64_JUMP_SLOT` and
/// `R_X86_64_GLOB_DAT` relocations) for `malloc`, `calloc`, `realloc`, `posix_memalign`,
/// `aligned_alloc`, `memalign`, `valloc` and `reallocarray` in every loaded object (the test
/// executable, libswiftCore, libstdc++, libyuv, libc itself, ...) to point at counting hooks, then
/// puts the original values back. A hook counts only calls made on the measuring thread (other
/// tests running in parallel are not counted) and forwards to the function `dlsym` finds for the
/// name, which is glibc's allocator, or ThreadSanitizer's interceptor in a `--sanitize=thread` build.
/// Swift's `swift_allocObject`/`swift_slowAlloc`, C++ `operator new` (libstdc++ calls `malloc`)
/// and libyuv's `align_buffer_64` all go through these slots, so every allocation that can happen
/// on a hot path is seen. glibc-internal calls that bypass the PLT (none on our paths) are not.
/// This replaces `__malloc_hook` (removed in glibc 2.34); `mallinfo2()` deltas were rejected
/// because they are net byte counts over all threads (a malloc+free pair nets zero, and tcache
/// reuse hides it entirely). Measurements are serialised by a process-wide lock.
/// Known gap: with other tests running in parallel in the same process, walking the loader's object
/// list crashed (a bad `l_ld`/symbol-table pointer, cause not yet found), so `make test` runs every
/// test whose name contains "allocat" in a test process that runs one test at a time
/// (scripts/test), and the walk skips any object whose tables do not lie inside its loaded segments.
/// Lives in its own target (MediaTestSupport) so that both MediaCoreTests and MediaRealtimeTests
/// use this one counter.
package enum AllocationCounter {
    /// Runs `body` on this thread and returns how many allocation calls it made.
    package static func count(_ body: () throws -> Void) rethrows -> Int {
        try lock.withLock { _ in
            prepare()
            let patched = patchAll()
            defer { restore(patched) }
            allocations.store(0, ordering: .relaxed)
            measuringThread.store(UInt(pthread_self()), ordering: .sequentiallyConsistent)
            defer { measuringThread.store(0, ordering: .sequentiallyConsistent) }
            try body()
            return allocations.load(ordering: .relaxed)
        }
    }
}

private let lock = Mutex<Void>(())
private let measuringThread = Atomic<UInt>(0)
private let allocations = Atomic<Int>(0)

private let realMalloc = Atomic<UInt>(0)
private let realCalloc = Atomic<UInt>(0)
private let realRealloc = Atomic<UInt>(0)
private let realPosixMemalign = Atomic<UInt>(0)
private let realAlignedAlloc = Atomic<UInt>(0)
private let realMemalign = Atomic<UInt>(0)
private let realValloc = Atomic<UInt>(0)
private let realReallocarray = Atomic<UInt>(0)

private typealias Alloc1 = @convention(c) (Int) -> UnsafeMutableRawPointer?
private typealias Alloc2 = @convention(c) (Int, Int) -> UnsafeMutableRawPointer?
private typealias Realloc = @convention(c) (UnsafeMutableRawPointer?, Int) -> UnsafeMutableRawPointer?
private typealias ReallocArray = @convention(c) (UnsafeMutableRawPointer?, Int, Int) -> UnsafeMutableRawPointer?
private typealias PosixMemalign = @convention(c) (UnsafeMutablePointer<UnsafeMutableRawPointer?>?, Int, Int) -> Int32

@inline(__always) private func note() {
    let thread = measuringThread.load(ordering: .relaxed)
    if thread != 0 && thread == UInt(pthread_self()) { allocations.add(1, ordering: .relaxed) }
}

private let hookMalloc: Alloc1 = { n in
    note(); return unsafeBitCast(realMalloc.load(ordering: .relaxed), to: Alloc1.self)(n)
}
private let hookCalloc: Alloc2 = { a, b in
    note(); return unsafeBitCast(realCalloc.load(ordering: .relaxed), to: Alloc2.self)(a, b)
}
private let hookRealloc: Realloc = { p, n in
    note(); return unsafeBitCast(realRealloc.load(ordering: .relaxed), to: Realloc.self)(p, n)
}
private let hookPosixMemalign: PosixMemalign = { out, a, n in
    note(); return unsafeBitCast(realPosixMemalign.load(ordering: .relaxed), to: PosixMemalign.self)(out, a, n)
}
private let hookAlignedAlloc: Alloc2 = { a, n in
    note(); return unsafeBitCast(realAlignedAlloc.load(ordering: .relaxed), to: Alloc2.self)(a, n)
}
private let hookMemalign: Alloc2 = { a, n in
    note(); return unsafeBitCast(realMemalign.load(ordering: .relaxed), to: Alloc2.self)(a, n)
}
private let hookValloc: Alloc1 = { n in
    note(); return unsafeBitCast(realValloc.load(ordering: .relaxed), to: Alloc1.self)(n)
}
private let hookReallocarray: ReallocArray = { p, a, b in
    note(); return unsafeBitCast(realReallocarray.load(ordering: .relaxed), to: ReallocArray.self)(p, a, b)
}

/// (symbol name, hook address) pairs; built once, before any GOT is touched.
private nonisolated(unsafe) var hooks: [(name: String, hook: UInt)] = []

/// Resolves the real functions and the hook table (allocates; runs before patching).
private func prepare() {
    guard hooks.isEmpty else { return }
    func real(_ name: String, _ cell: borrowing Atomic<UInt>) {
        let p = dlsym(nil, name)  // RTLD_DEFAULT: the definition every object's GOT resolves to
        precondition(p != nil, "dlsym(\(name)) failed")
        cell.store(UInt(bitPattern: p), ordering: .relaxed)
    }
    real("malloc", realMalloc); real("calloc", realCalloc); real("realloc", realRealloc)
    real("posix_memalign", realPosixMemalign); real("aligned_alloc", realAlignedAlloc)
    real("memalign", realMemalign); real("valloc", realValloc); real("reallocarray", realReallocarray)
    hooks = [
        ("malloc", unsafeBitCast(hookMalloc, to: UInt.self)),
        ("calloc", unsafeBitCast(hookCalloc, to: UInt.self)),
        ("realloc", unsafeBitCast(hookRealloc, to: UInt.self)),
        ("posix_memalign", unsafeBitCast(hookPosixMemalign, to: UInt.self)),
        ("aligned_alloc", unsafeBitCast(hookAlignedAlloc, to: UInt.self)),
        ("memalign", unsafeBitCast(hookMemalign, to: UInt.self)),
        ("valloc", unsafeBitCast(hookValloc, to: UInt.self)),
        ("reallocarray", unsafeBitCast(hookReallocarray, to: UInt.self)),
    ]
}

/// glibc's `struct link_map` head (stable public ABI, `<link.h>`); a `dlopen` handle points at it.
private struct LinkMap {
    var addr: UInt
    var name: UnsafePointer<CChar>?
    var dynamic: UnsafeMutablePointer<Elf64_Dyn>?
    var next: UnsafeMutablePointer<LinkMap>?
    var prev: UnsafeMutablePointer<LinkMap>?
}

private struct PatchedSlot {
    var slot: UnsafeMutablePointer<UInt>
    var original: UInt
    var relro: Bool
}

private let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))

private func setWritable(_ slot: UnsafeMutablePointer<UInt>, _ writable: Bool) {
    let page = UnsafeMutableRawPointer(bitPattern: UInt(bitPattern: slot) & ~UInt(pageSize - 1))
    let rc = mprotect(page, pageSize, writable ? (PROT_READ | PROT_WRITE) : PROT_READ)
    precondition(rc == 0, "mprotect of a GOT page failed: errno \(errno)")
}

/// Rewrites every allocation GOT slot to its hook; returns what to put back.
private func patchAll() -> [PatchedSlot] {
    var patched: [PatchedSlot] = []
    patched.reserveCapacity(256)
    var found: [(slot: UnsafeMutablePointer<UInt>, hook: UInt, relro: Bool)] = []
    found.reserveCapacity(256)
    guard let handle = dlopen(nil, RTLD_NOW) else { return [] }
    var entry: UnsafeMutablePointer<LinkMap>? = handle.assumingMemoryBound(to: LinkMap.self)
    while let map = entry {
        entry = map.pointee.next
        guard let dynamic = map.pointee.dynamic else { continue }
        let name = map.pointee.name.map { String(cString: $0) } ?? ""
        if name.contains("ld-linux") || name.contains("linux-vdso") { continue }
        let base = map.pointee.addr
        var symtab: UInt = 0, strtab: UInt = 0, jmprel: UInt = 0, pltSize: UInt = 0, rela: UInt = 0, relaSize: UInt = 0
        var d = dynamic
        while d.pointee.d_tag != Int64(DT_NULL) {
            let value = d.pointee.d_un.d_ptr
            switch Int32(d.pointee.d_tag) {
            case DT_SYMTAB: symtab = UInt(value)
            case DT_STRTAB: strtab = UInt(value)
            case DT_JMPREL: jmprel = UInt(value)
            case DT_PLTRELSZ: pltSize = UInt(value)
            case DT_RELA: rela = UInt(value)
            case DT_RELASZ: relaSize = UInt(value)
            default: break
            }
            d += 1
        }
        // glibc relocates these entries in place for most objects; add the base where it did not.
        func absolute(_ p: UInt) -> UInt { p != 0 && p < base ? p &+ base : p }
        symtab = absolute(symtab); strtab = absolute(strtab); jmprel = absolute(jmprel); rela = absolute(rela)
        guard symtab != 0, strtab != 0 else { continue }
        // Every table must lie inside the object's loaded segments: an object another thread is
        // loading or unloading (dlopen of an NSS module during getaddrinfo, say) can show
        // half-made pointers, and reading through one crashed a CI run. Skip such an object.
        let loaded = loadRange(base)
        if base != 0 {
            guard !loaded.isEmpty, loaded.contains(symtab), loaded.contains(strtab),
                jmprel == 0 || loaded.contains(jmprel), rela == 0 || loaded.contains(rela),
                jmprel == 0 || loaded.contains(jmprel &+ pltSize &- 1),
                rela == 0 || loaded.contains(rela &+ relaSize &- 1)
            else { continue }
        }
        let relro = relroRange(base)
        for (table, size) in [(jmprel, pltSize), (rela, relaSize)] where table != 0 && size != 0 {
            let relocations = UnsafePointer<Elf64_Rela>(bitPattern: table)!
            for i in 0..<Int(size) / MemoryLayout<Elf64_Rela>.stride {
                let info = relocations[i].r_info
                let type = UInt32(truncatingIfNeeded: info)
                guard type == UInt32(R_X86_64_JUMP_SLOT) || type == UInt32(R_X86_64_GLOB_DAT) else { continue }
                let symbolAddress = symtab &+ UInt(info >> 32) &* UInt(MemoryLayout<Elf64_Sym>.stride)
                guard base == 0 || loaded.contains(symbolAddress) else { continue }
                let symbol = UnsafePointer<Elf64_Sym>(bitPattern: symbolAddress)!.pointee
                guard symbol.st_name != 0, base == 0 || loaded.contains(strtab &+ UInt(symbol.st_name)) else { continue }
                let symbolName = UnsafePointer<CChar>(bitPattern: strtab + UInt(symbol.st_name))!
                for (hookName, hook) in hooks where strcmp(symbolName, hookName) == 0 {
                    let slot = UnsafeMutablePointer<UInt>(bitPattern: base &+ UInt(relocations[i].r_offset))!
                    found.append((slot, hook, relro.contains(UInt(bitPattern: slot))))
                }
            }
        }
    }
    for f in found {
        setWritable(f.slot, true)
        patched.append(PatchedSlot(slot: f.slot, original: f.slot.pointee, relro: f.relro))
        f.slot.pointee = f.hook
    }
    return patched
}

private func restore(_ patched: [PatchedSlot]) {
    // Values first (pages shared by several slots are still writable), then protections.
    for p in patched.reversed() { p.slot.pointee = p.original }
    for p in patched where p.relro { setWritable(p.slot, false) }
}

/// The span of the object's PT_LOAD segments in memory, from its in-memory ELF header.
private func loadRange(_ base: UInt) -> Range<UInt> {
    guard base != 0, let header = UnsafePointer<Elf64_Ehdr>(bitPattern: base),
        header.pointee.e_ident.0 == 0x7f, header.pointee.e_ident.1 == 0x45
    else { return 0..<0 }
    let phdrs = UnsafePointer<Elf64_Phdr>(bitPattern: base &+ UInt(header.pointee.e_phoff))!
    var low = UInt.max, high: UInt = 0
    for i in 0..<Int(header.pointee.e_phnum) where phdrs[i].p_type == UInt32(PT_LOAD) {
        low = min(low, base &+ UInt(phdrs[i].p_vaddr))
        high = max(high, base &+ UInt(phdrs[i].p_vaddr) &+ UInt(phdrs[i].p_memsz))
    }
    return low < high ? low..<high : 0..<0
}

/// The object's PT_GNU_RELRO range (read-only after relocation), from its in-memory ELF header.
private func relroRange(_ base: UInt) -> Range<UInt> {
    guard base != 0, let header = UnsafePointer<Elf64_Ehdr>(bitPattern: base),
        header.pointee.e_ident.0 == 0x7f, header.pointee.e_ident.1 == 0x45
    else { return 0..<0 }
    let phdrs = UnsafePointer<Elf64_Phdr>(bitPattern: base &+ UInt(header.pointee.e_phoff))!
    for i in 0..<Int(header.pointee.e_phnum) where phdrs[i].p_type == UInt32(PT_GNU_RELRO) {
        let start = base &+ UInt(phdrs[i].p_vaddr)
        return start..<(start &+ UInt(phdrs[i].p_memsz))
    }
    return 0..<0
}
