export const value = 2
