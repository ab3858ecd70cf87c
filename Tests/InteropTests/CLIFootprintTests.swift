import Foundation
import Testing

// The executables' footprint: neither tool loads Foundation's full library (with its ICU data and
// internationalization layer, about 6 MiB of resident memory per process), only
// FoundationEssentials. The dynamic section is read by binutils' readelf, not by our code.
@Suite struct CLIFootprintTests {
    /// The shared libraries `binary` asks the dynamic loader for (its NEEDED entries).
    private func neededLibraries(_ binary: String) throws -> [String] {
        let run = try runTool("readelf", ["-d", binary])
        try #require(run.status == 0, "readelf -d \(binary): \(run.stderr)")
        return run.stdout.split(separator: "\n").compactMap { line in
            guard line.contains("(NEEDED)"), let open = line.firstIndex(of: "["), let close = line.lastIndex(of: "]")
            else { return nil }
            return String(line[line.index(after: open)..<close])
        }
    }

    @Test(arguments: ["revue-media", "revue-node"])
    func toolsLinkFoundationEssentialsOnly(tool: String) throws {
        let path = "\(CLIBinary.directory)/\(tool)"
        try #require(FileManager.default.isExecutableFile(atPath: path), "\(path) is not built")
        let needed = try neededLibraries(path)
        #expect(needed.contains("libswiftCore.so"), "readelf saw \(needed)")
        #expect(needed.contains("libFoundationEssentials.so"), "readelf saw \(needed)")
        for heavy in ["libFoundation.so", "libFoundationInternationalization.so", "lib_FoundationICU.so"] {
            #expect(!needed.contains(heavy), "\(tool) links \(heavy)")
        }
    }
}
