/** Distance in float32 units in the last place between two float32 values (the averaging tests' rounding bound). */
export const ulpDistance = (a: number, b: number): number => {
  const view = new DataView(new ArrayBuffer(8))
  view.setFloat32(0, a)
  view.setFloat32(4, b)
  const ia = view.getInt32(0)
  const ib = view.getInt32(4)
  return Math.abs((ia < 0 ? 0x80000000 - ia : ia) - (ib < 0 ? 0x80000000 - ib : ib))
}
