export const value = 3
