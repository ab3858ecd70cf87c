import MediaCore
import Testing

@Suite struct ByteReaderWriterTests {
    static let bytes: [UInt8] = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A]

    @Test func readsEveryWidthBigEndian() {
        let a = Self.bytes
        var r = SpanReader(a.span.bytes)
        #expect(r.u8() == 0x01)
        #expect(r.u16() == 0x0203)
        #expect(r.u24() == 0x04_0506)
        #expect(r.remaining == 4)
        #expect(r.u32() == 0x0708_090A)
        let atEnd = r.isAtEnd
        #expect(atEnd)
        var r8 = SpanReader(a.span.bytes)
        #expect(r8.u64(.big) == 0x0102_0304_0506_0708)
        #expect(r8.offset == 8)
    }

    @Test func readsEveryWidthLittleEndian() {
        let a = Self.bytes
        var r = SpanReader(a.span.bytes)
        #expect(r.u8() == 0x01)
        #expect(r.u16(.little) == 0x0302)
        #expect(r.u24(.little) == 0x06_0504)
        #expect(r.u32(.little) == 0x0A09_0807)
        let atEnd = r.isAtEnd
        #expect(atEnd)
        var r8 = SpanReader(a.span.bytes)
        #expect(r8.u64(.little) == 0x0807_0605_0403_0201)
        #expect(r8.remaining == 2)
    }

    @Test(arguments: 0..<8)
    func shortInputReturnsNilAndDoesNotMove(length: Int) {
        let a = Array(Self.bytes.prefix(length))
        var r = SpanReader(a.span.bytes)
        if length < 8 { #expect(r.u64() == nil && r.u64(.little) == nil) }
        if length < 4 { #expect(r.u32() == nil && r.u32(.little) == nil) }
        if length < 3 { #expect(r.u24() == nil && r.u24(.little) == nil) }
        if length < 2 { #expect(r.u16() == nil && r.u16(.little) == nil) }
        if length < 1 { #expect(r.u8() == nil) }
        #expect(r.offset == 0)
        #expect(r.remaining == length)
        let took = r.take(length + 1) != nil
        let skipped = r.skip(length + 1)
        let copied = r.array(length + 1)
        #expect(!took && !skipped && copied == nil)
        #expect(r.offset == 0)
    }

    @Test func skipTakeRestAndArray() {
        let a = Self.bytes
        var r = SpanReader(a.span.bytes)
        let skipped = r.skip(2), skippedNegative = r.skip(-1)
        #expect(skipped && !skippedNegative)
        var fields: (count: Int, first: UInt8, pair: UInt16)?
        if let sub = r.take(3) { fields = (sub.byteCount, sub.u8(0), sub.u16(1)) }
        #expect(fields?.count == 3 && fields?.first == 0x03 && fields?.pair == 0x0405)
        let tookNegative = r.take(-1) != nil
        let restCount = r.rest.byteCount
        #expect(!tookNegative && restCount == 5 && r.offset == 5)
        #expect(r.array(2) == [0x06, 0x07])
        let lastCount = r.take(3)?.byteCount
        let atEnd = r.isAtEnd
        let emptyCount = r.take(0)?.byteCount
        #expect(lastCount == 3 && atEnd && emptyCount == 0)
        #expect(r.u8() == nil)
    }

    @Test func positionalReadsBothOrders() {
        let s = Self.bytes.span.bytes
        #expect(s.u8(9) == 0x0A)
        #expect(s.u16(1) == 0x0203 && s.u16(1, .little) == 0x0302)
        #expect(s.u24(1) == 0x02_0304 && s.u24(1, .little) == 0x04_0302)
        #expect(s.u32(2) == 0x0304_0506 && s.u32(2, .little) == 0x0605_0403)
        #expect(s.u64(2) == 0x0304_0506_0708_090A && s.u64(2, .little) == 0x0A09_0807_0605_0403)
        #expect(s.array(8, 2) == [0x09, 0x0A])
    }

    @Test(arguments: [ByteOrder.big, ByteOrder.little])
    func arrayAndSpanWritersAgreeAndRoundTrip(order: ByteOrder) {
        var a: [UInt8] = []
        a.appendU8(0xAB)
        a.appendU16(0x1234, order)
        a.appendU24(0xFF_5678, order)
        a.appendU32(0x9ABC_DEF0, order)
        a.appendU64(0x0102_0304_0506_0708, order)
        #expect(a.count == 1 + 2 + 3 + 4 + 8)
        if order == .big {
            #expect(Array(a[0..<6]) == [0xAB, 0x12, 0x34, 0xFF, 0x56, 0x78])
        } else {
            #expect(Array(a[0..<6]) == [0xAB, 0x34, 0x12, 0x78, 0x56, 0xFF])
        }

        let extra: [UInt8] = [9, 8, 7]
        let spanWritten = [UInt8](unsafeUninitializedCapacity: 32) { buffer, count in
            var out = OutputRawSpan(buffer: UnsafeMutableRawBufferPointer(buffer), initializedCount: 0)
            out.appendU8(0xAB)
            out.appendU16(0x1234, order)
            out.appendU24(0xFF_5678, order)
            out.appendU32(0x9ABC_DEF0, order)
            out.appendU64(0x0102_0304_0506_0708, order)
            out.appendZeros(2)
            out.appendBytes(extra.span.bytes)
            out.appendBytes([UInt8]().span.bytes)
            count = out.finalize(for: UnsafeMutableRawBufferPointer(buffer))
        }
        #expect(Array(spanWritten.prefix(a.count)) == a)
        #expect(Array(spanWritten.suffix(5)) == [0, 0, 9, 8, 7])

        var r = SpanReader(spanWritten.span.bytes)
        #expect(r.u8() == 0xAB)
        #expect(r.u16(order) == 0x1234)
        #expect(r.u24(order) == 0xFF_5678)
        #expect(r.u32(order) == 0x9ABC_DEF0)
        #expect(r.u64(order) == 0x0102_0304_0506_0708)
        #expect(r.remaining == 5)
    }

    @Test func appendU24KeepsOnlyTheLowThreeBytes() {
        var a: [UInt8] = []
        a.appendU24(0xEE12_3456)
        a.appendU24(0xEE12_3456, .little)
        #expect(a == [0x12, 0x34, 0x56, 0x56, 0x34, 0x12])
    }
}
